"""The layers of docs/ARCHITECTURE.md: the Qt-free core imports no Qt, and imports point
downwards only (errors < llm < local < chat; store and settings below chat)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

DESKTOP = Path(__file__).resolve().parents[1] / "desktop"

# What each package may import from desktop (besides itself). ``desktop.errors`` is the
# bottom: every layer may import it, it imports nothing of ours.
ALLOWED = {
    "errors": set(),
    "llm": {"errors"},
    "local": {"errors", "llm"},
    "store": {"errors"},
    "settings": {"errors", "store"},
    "hub": {"errors", "local", "settings"},
    "tools": {"errors", "settings", "store"},
    "chat": {"errors", "llm", "local", "store", "settings", "hub", "tools"},
}


def test_qt_free_core_imports_no_pyside6() -> None:
    code = (
        "import sys\n"
        "import desktop.chat.services, desktop.chat.session, desktop.chat.agents\n"
        "import desktop.chat.kinds, desktop.chat.agent_rules, desktop.errors\n"
        "import desktop.llm.openai_compat, desktop.local.provider, desktop.local.engine\n"
        "import desktop.store.db, desktop.settings.secrets, desktop.cli\n"
        "import desktop.hub.service, desktop.hub.files, desktop.hub.downloads\n"
        "import desktop.tools.manager, desktop.tools.config, desktop.cli_mcp\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'qasync')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"Qt-free packages imported: {out.stdout}"


def _imports(path: Path) -> set[str]:
    """Every ``desktop.*`` module the file imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("desktop."))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("desktop"):
            module = node.module or ""
            found.update(
                f"{module}.{a.name}" if module == "desktop" else module for a in node.names
            )
    return found


def _layer(module: str) -> str:
    return module.split(".")[1]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_downwards(layer: str) -> None:
    files = (
        [DESKTOP / "errors.py"] if layer == "errors" else sorted((DESKTOP / layer).rglob("*.py"))
    )
    assert files
    wrong = []
    for path in files:
        module = ".".join(path.relative_to(DESKTOP.parent).with_suffix("").parts)
        for imported in _imports(path):
            target = _layer(imported)
            if target == layer or target in ALLOWED[layer]:
                continue
            wrong.append(f"{module} imports {imported}")
    assert wrong == []


def test_every_error_a_person_sees_is_a_user_error_in_its_own_home() -> None:
    from desktop.chat.export import ExportError
    from desktop.errors import UserError, ValidationError
    from desktop.llm import errors as llm_errors
    from desktop.settings.secrets import SecretsUnavailable
    from desktop.store.errors import StoreUnavailable
    from desktop.tools.errors import ToolServerError, ToolTimeout

    for cls in (ValidationError, StoreUnavailable, SecretsUnavailable, ExportError):
        assert issubclass(cls, UserError), cls
    assert issubclass(ToolTimeout, ToolServerError) and issubclass(ToolServerError, UserError)
    assert StoreUnavailable.__module__ == "desktop.store.errors"
    assert SecretsUnavailable.__module__ == "desktop.settings.secrets"
    assert ValidationError.__module__ == UserError.__module__ == "desktop.errors"
    # Provider errors stay in llm/errors.py (built on the one UserError); nothing else does.
    assert llm_errors.AuthError.__module__ == "desktop.llm.errors"
    assert issubclass(llm_errors.AuthError, UserError)
    assert not hasattr(llm_errors, "StoreUnavailable")
    assert not hasattr(llm_errors, "SecretsUnavailable")
