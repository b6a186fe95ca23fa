"""Which llama.cpp build a start uses when the package carries two (desktop/local/libraries.py).

The folders here are stand-ins for the package's ``llama_cpp/lib`` and ``lib-vulkan`` (empty
files named like the libraries): what is tested is the choice, the cache and the fallbacks.
The probe itself runs for real against the installed (CPU) build, in its own process; the
Vulkan build runs for real on lavapipe in tests/gpu/ (scripts/test-gpu-path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.local import libraries
from desktop.local.libraries import Choice, builds, choose, probe


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A llama_cpp package folder with a CPU build and a Vulkan build beside it."""
    pkg = tmp_path / "llama_cpp"
    for sub in ("lib", "lib-vulkan"):
        (pkg / sub).mkdir(parents=True)
        for stem in ("ggml-base", "ggml", "llama"):
            (pkg / sub / f"lib{stem}.so").write_bytes(b"")
    (pkg / "lib-vulkan" / "libggml-vulkan.so").write_bytes(b"")
    monkeypatch.setattr(libraries, "package_folder", lambda: pkg)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(libraries.ENV_CHOICE, raising=False)
    return pkg


def test_both_builds_are_found_and_a_folder_without_libllama_is_none(package: Path) -> None:
    assert builds() == {"cpu": package / "lib", "vulkan": package / "lib-vulkan"}
    (package / "lib-vulkan" / "libllama.so").unlink()
    assert builds() == {"cpu": package / "lib"}


def test_no_gpu_device_node_means_the_cpu_build_and_no_probe(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(libraries, "gpu_device_nodes", lambda: [])
    monkeypatch.setattr(libraries, "probe", lambda *_: pytest.fail("probed without a GPU"))
    choice = choose()
    assert (choice.name, choice.folder) == ("cpu", package / "lib")
    assert "no GPU device node" in choice.why


def test_a_real_gpu_picks_vulkan_and_the_answer_is_kept_per_hardware(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []

    def found_gpu(folder: Path) -> list[str]:
        calls.append(folder)
        return ["Vulkan0 · NVIDIA H200"]

    monkeypatch.setattr(libraries, "gpu_device_nodes", lambda: ["renderD128"])
    monkeypatch.setattr(libraries, "probe", found_gpu)
    choice = choose()
    assert (choice.name, choice.folder) == ("vulkan", package / "lib-vulkan")
    assert choice.why == "Vulkan GPU Vulkan0 · NVIDIA H200"
    assert choose().name == "vulkan" and len(calls) == 1  # the second start asked the cache
    # other hardware (a second render node) asks again
    monkeypatch.setattr(libraries, "gpu_device_nodes", lambda: ["renderD128", "renderD129"])
    choose()
    assert len(calls) == 2


def test_software_only_or_a_crashed_probe_keeps_the_cpu_build(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(libraries, "gpu_device_nodes", lambda: ["renderD128"])
    monkeypatch.setattr(libraries, "probe", lambda _folder: [])  # llvmpipe only
    assert choose().name == "cpu"
    cache = Path(os.environ["XDG_CACHE_HOME"], "simi-multi", "llama-build-choice.json")
    assert list(json.loads(cache.read_text()).values()) == [[]]
    cache.unlink()
    monkeypatch.setattr(libraries, "probe", lambda _folder: None)  # crashed or hung
    assert choose().name == "cpu"
    assert not cache.exists()  # tried again at the next start


def test_the_setting_overrides_the_probe(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libraries, "gpu_device_nodes", lambda: ["renderD128"])
    monkeypatch.setattr(libraries, "probe", lambda _folder: ["Vulkan0 · Radeon"])
    assert choose({"SIMI_LLAMA_LIBS": "cpu"}).name == "cpu"
    monkeypatch.setattr(libraries, "gpu_device_nodes", lambda: [])
    forced = choose({"SIMI_LLAMA_LIBS": "vulkan"})
    assert (forced.name, forced.why) == ("vulkan", "SIMI_LLAMA_LIBS=vulkan")
    assert choose({"SIMI_LLAMA_LIBS": "opencl"}).name == "cpu"  # unknown: auto, with a warning


def test_an_install_with_one_build_never_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "llama_cpp" / "lib"
    pkg.mkdir(parents=True)
    (pkg / "libllama.so").write_bytes(b"")
    monkeypatch.setattr(libraries, "package_folder", lambda: pkg.parent)
    monkeypatch.setattr(libraries, "probe", lambda *_: pytest.fail("probed"))
    assert choose({"SIMI_LLAMA_LIBS": "vulkan"}) == Choice(
        "cpu", pkg, "the build installed with llama-cpp-python"
    )


def test_gpu_device_nodes_reads_render_and_nvidia_nodes(tmp_path: Path) -> None:
    (tmp_path / "dri").mkdir()
    for name in ("dri/renderD128", "dri/card0", "nvidia0", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).write_bytes(b"")
    assert libraries.gpu_device_nodes(tmp_path) == ["nvidia0", "renderD128"]
    assert libraries.gpu_device_nodes(tmp_path / "missing") == []


def test_the_probe_loads_a_real_build_in_its_own_process() -> None:
    """The installed build (CPU here) lists no GPU: an empty answer, not a failure."""
    folder = builds().get("cpu")
    if folder is None:
        pytest.skip("llama-cpp-python is not installed")
    answer = probe(folder, timeout=60)
    assert answer is not None
    if not any((folder / f"libggml-{b}.so").exists() for b in ("vulkan", "cuda", "hip")):
        assert answer == []


def test_a_chosen_folder_is_what_llama_cpp_and_the_workers_load(tmp_path: Path) -> None:
    """``use`` in a fresh process: llama_cpp imports from the chosen folder (here a copy of the
    installed build, standing in for lib-vulkan) and a worker started after it inherits it."""
    folder = builds().get("cpu")
    if folder is None:
        pytest.skip("llama-cpp-python is not installed")
    copy = tmp_path / "lib-copy"
    copy.mkdir()
    for lib in folder.iterdir():
        (copy / lib.name).write_bytes(lib.read_bytes())
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from desktop.local import libraries\n"
        "libraries.use(libraries.Choice('vulkan', Path(sys.argv[1]), 'test'))\n"
        "import llama_cpp\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(os.environ['LLAMA_CPP_LIB_PATH'])\n"
        "print(sys.argv[1] + '/libllama.so' in maps, sys.argv[1] + '/libggml-base.so' in maps)\n"
        "from desktop.local.gpu import _lib_dir\n"
        "print(_lib_dir())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split("\n")
    assert out[0] == str(copy)
    assert out[1] == "True True", "llama.cpp came from the default folder, not the chosen one"
    assert out[2] == str(copy)


def test_a_vulkan_build_without_the_vulkan_loader_falls_back_and_says_why(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stands in for a machine without libvulkan1 (a Recommends of the package): the forced
    Vulkan start keeps the CPU build, and the reason names the missing loader (in a bundle
    PyInstaller's own message would only say the library was not found when frozen)."""
    import ctypes

    real = ctypes.CDLL

    def no_loader(name: str, *args: object, **kwargs: object) -> object:
        if name == "libvulkan.so.1":
            raise OSError("libvulkan.so.1: cannot open shared object file")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", no_loader)
    monkeypatch.setattr(libraries, "_preloaded", [])
    monkeypatch.setattr(libraries, "_started", None)
    monkeypatch.setenv("SIMI_LLAMA_LIBS", "vulkan")
    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    choice = libraries.choose_at_start()
    assert (choice.name, choice.folder) == ("cpu", package / "lib")
    assert "libvulkan.so.1 is not installed (apt install libvulkan1)" in choice.why
    assert "LLAMA_CPP_LIB_PATH" not in os.environ
