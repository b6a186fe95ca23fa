"""The SQLite store: one file, migrated in order (``db``), one store class per table family.

sqlite-utils maps numpy and pandas value types when it can import them at its own import; the
store never hands it such values, and importing numpy costs a tenth of a second of the
window's start. So sqlite-utils is imported here, before any store module, with those two
hidden from it (a process that has already loaded them keeps them: nothing is unloaded).
"""

import sys


def _import_sqlite_utils_lean() -> None:
    hidden = [name for name in ("numpy", "pandas") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    try:
        import sqlite_utils  # noqa: F401
    finally:
        for name in hidden:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


_import_sqlite_utils_lean()
