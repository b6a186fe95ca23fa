"""Who this build is: the facts `simi --version --verbose` prints and Help → About shows.

Qt-free and cheap: versions come from installed package metadata (or the package's own
``__version__`` attribute when Qt is already loaded), llama.cpp's backend from the library files
its package ships (``ggml-cuda``, ``ggml-metal``, ``ggml-vulkan``, …): llama.cpp is never loaded
here, and nothing imports PySide6 unless the caller already has.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from desktop import APP_NAME, __version__
from desktop.local.devices import backend_from_libs
from desktop.local.libraries import active_folder, builds, choose_at_start
from desktop.local.starter import STARTER_MODEL_NAME, starter_model_path
from desktop.settings.paths import AppPaths

LICENCE = "Apache License 2.0"
SUMMARY = "A desktop workspace for talking to many AI models at once, with every reply measured."

# (part, licence) of what the bundle and the packages carry; the model's licence is its own.
BUNDLED_LICENCES: tuple[tuple[str, str], ...] = (
    (APP_NAME, "Apache-2.0"),
    ("Python", "PSF-2.0"),
    ("Qt / PySide6", "LGPL-3.0-only"),
    ("llama.cpp / llama-cpp-python", "MIT"),
    (f"{STARTER_MODEL_NAME} (starter model)", "Apache-2.0"),
    ("genai-prices", "MIT"),
    ("pydantic", "MIT"),
    ("httpx", "BSD-3-Clause"),
    ("numpy", "BSD-3-Clause"),
    ("Jinja2", "BSD-3-Clause"),
    ("qasync", "BSD-2-Clause"),
    ("keyring", "MIT"),
    ("Pygments", "BSD-2-Clause"),
    ("sqlite-utils", "Apache-2.0"),
    ("platformdirs", "MIT"),
)


@dataclass(frozen=True, slots=True)
class Identity:
    version: str
    python: str
    qt: str
    llama_cpp: str
    backend: str
    starter: str
    system: str
    data_dir: str
    frozen: bool

    def rows(self) -> list[tuple[str, str]]:
        """(what, value) rows, in the order About and `--version --verbose` show them."""
        return [
            ("Version", self.version),
            ("llama.cpp", self.llama_cpp),
            ("Backend", self.backend),
            ("Starter model", self.starter),
            ("Qt", self.qt),
            ("Python", self.python),
            ("System", self.system),
            ("Data folder", self.data_dir),
            ("Licence", LICENCE),
            ("Build", "bundle (PyInstaller)" if self.frozen else "Python package"),
        ]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _qt() -> str:
    """Qt and PySide6 versions: from the loaded modules when Qt is up, else from metadata (the
    CLI never imports Qt to print a version)."""
    core = sys.modules.get("PySide6.QtCore")
    pyside = sys.modules.get("PySide6")
    if core is not None and pyside is not None:
        return f"{core.qVersion()} (PySide6 {pyside.__version__})"
    pyside_version = _version("PySide6_Essentials") or _version("PySide6")
    if pyside_version is None:
        return "not installed"
    # PySide6 x.y.z bundles Qt x.y.z.
    return f"{pyside_version.split('+')[0]} (PySide6 {pyside_version})"


def llama_lib_dir() -> Path | None:
    """The library folder of the llama.cpp build this process uses, found without importing
    the package (``desktop.local.libraries``)."""
    return active_folder()


def llama_backend() -> str:
    """CPU, or the GPU backend whose library this llama.cpp build ships; "unavailable" when
    llama-cpp-python is not installed. With two builds installed (the package's CPU and
    Vulkan), which one this start chose and why."""
    lib = llama_lib_dir()
    if lib is None:
        return "unavailable"
    backend = backend_from_libs(lib) or "CPU"
    if len(builds()) > 1:
        backend += f" (of {', '.join(sorted(builds()))}: {choose_at_start().why})"
    return backend


def identity(paths: AppPaths | None = None) -> Identity:
    paths = paths or AppPaths.from_env()
    llama = _version("llama_cpp_python")
    starter = "installed" if starter_model_path() is not None else "not installed"
    return Identity(
        version=__version__,
        python=platform.python_version(),
        qt=_qt(),
        llama_cpp=f"llama-cpp-python {llama}" if llama else "not installed",
        backend=llama_backend(),
        starter=f"{STARTER_MODEL_NAME} ({starter})",
        system=f"{platform.system()} {platform.release()} ({platform.machine()})",
        data_dir=str(paths.data_dir),
        frozen=bool(getattr(sys, "frozen", False)),
    )


def licences_text() -> str:
    """The licences on one line (the About window's row)."""
    return "; ".join(f"{part}: {licence}" for part, licence in BUNDLED_LICENCES)


def verbose_text(ident: Identity | None = None) -> str:
    """`simi --version --verbose` and About → Copy: every row, then the licences."""
    ident = ident or identity()
    lines = [f"{APP_NAME} {ident.version}"]
    lines += [f"{what}: {value}" for what, value in ident.rows() if what != "Version"]
    lines.append("Licences of bundled parts:")
    lines += [f"  {part}: {licence}" for part, licence in BUNDLED_LICENCES]
    return "\n".join(lines)


def price_check() -> str:
    """SIMI_SELF_CHECK=1 `simi --version --verbose` (packaging/build-bundle.sh): prove that
    genai-prices and its data load in this build by pricing one known call."""
    from genai_prices import Usage, calc_price

    price = calc_price(
        Usage(input_tokens=1200, cache_read_tokens=1024, output_tokens=40),
        model_ref="gpt-4o-mini",
        provider_id="openai",
    ).total_price
    return f"Price check: gpt-4o-mini, 1,200 in (1,024 cached) + 40 out = ${price} (genai-prices)"
