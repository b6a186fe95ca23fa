"""`simi --version --verbose` and Help → About: the same facts, from desktop/identity.py."""

from __future__ import annotations

import platform
import time

import pytest

from desktop import __version__
from desktop.identity import BUNDLED_LICENCES, identity, llama_backend, verbose_text
from desktop.settings.paths import AppPaths
from tests.helpers.cli import packages_loaded, simi


def test_version_stays_one_line_and_fast(cli_env: dict) -> None:
    started = time.monotonic()
    out = simi(cli_env, "--version")
    elapsed = time.monotonic() - started
    assert out.returncode == 0 and out.stdout == f"SIMI Multi {__version__}\n"
    assert elapsed < 10  # a bare interpreter start plus argparse, never llama.cpp or Qt


@pytest.mark.parametrize("order", [("--version", "--verbose"), ("--verbose", "--version")])
def test_version_verbose_names_every_part(
    cli_env: dict, order: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = simi(cli_env, *order)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith(f"SIMI Multi {__version__}\n")
    monkeypatch.setenv("SIMI_HOME", cli_env["SIMI_HOME"])
    data_dir = AppPaths.from_env().data_dir
    for line in (
        f"Python: {platform.python_version()}",
        f"Data folder: {data_dir}",
        f"Backend: {llama_backend()}",
        "Licence: Apache License 2.0",
        "Build: Python package",
        "Starter model: SmolLM2-135M-Instruct (installed)",
    ):
        assert line in text.splitlines(), (line, text)
    assert "llama.cpp: llama-cpp-python 0." in text
    assert "PySide6 6." in text and "Qt: 6." in text
    assert "System: " in text
    for part, licence in BUNDLED_LICENCES:
        assert f"  {part}: {licence}" in text
    assert "  SmolLM2-135M-Instruct (starter model): Apache-2.0" in text


def test_verbose_version_loads_neither_qt_nor_llama_cpp() -> None:
    code = "from desktop.identity import verbose_text\nverbose_text()"
    assert packages_loaded(code, ("PySide6", "llama_cpp")) == []


def test_the_backend_is_cpu_for_a_build_without_gpu_libraries() -> None:
    assert identity().backend in {"CPU", "CUDA", "ROCm", "Metal", "Vulkan", "SYCL", "OpenCL"}
    assert verbose_text().count("\n") > len(BUNDLED_LICENCES)


def test_building_the_command_line_loads_no_store_qt_or_llama_cpp() -> None:
    """`simi --version` (and the parser every command builds first) imports neither the
    store's sqlite_utils (~170 ms with numpy), Qt nor llama.cpp: commands import what they
    use when they run."""
    heavy = ("sqlite_utils", "numpy", "PySide6", "llama_cpp", "genai_prices")
    assert packages_loaded("import desktop.cli", heavy) == []
