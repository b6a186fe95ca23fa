"""Which llama.cpp backend the install builds (scripts/lib.sh, issue 26 item 1).

The shell functions run in bash with a PATH of stub executables (nvidia-smi, nvcc, vulkaninfo,
rocminfo, hipcc, glslc, uname, pip) printing what the real ones print, plus the few system
tools lib.sh uses; nothing here builds anything.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What lib.sh's functions call besides the stubs (linked into a folder of their own, so a
# tool this machine happens to have, /usr/local/bin/nvcc say, is never found by accident).
SYSTEM_TOOLS = (
    "awk",
    "cat",
    "cut",
    "grep",
    "head",
    "id",
    "mkdir",
    "paste",
    "sed",
    "sha256sum",
    "sort",
    "touch",
    "tr",
    "uname",
)

NVIDIA_SMI = """case "$1" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-3c1a8f4e-0d2b-11ee-be56-0242ac120002)" ;;
  --query-gpu=compute_cap) echo "9.0" ;;
esac"""


def nvcc(release: str = "12.4") -> str:
    return f"""cat <<'EOF'
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Thu_Mar_28_02:18:24_PDT_2024
Cuda compilation tools, release {release}, V{release}.131
Build cuda_{release}.r{release}/compiler.34097967_0
EOF"""


VULKAN_HEAD = """==========
VULKANINFO
==========

Vulkan Instance Version: 1.3.239


Instance Extensions: count = 20
-------------------------------
VK_EXT_debug_report                    : extension revision 10
VK_KHR_surface                         : extension revision 25

Instance Layers:
----------------

Devices:
========
"""
LLVMPIPE = """GPU{n}:
	apiVersion         = 1.3.230
	driverVersion      = 0.0.1
	vendorID           = 0x10005
	deviceID           = 0x0000
	deviceType         = PHYSICAL_DEVICE_TYPE_CPU
	deviceName         = llvmpipe (LLVM 15.0.6, 256 bits)
	driverID           = DRIVER_ID_MESA_LLVMPIPE
	driverName         = llvmpipe
	driverInfo         = Mesa 22.3.6 (LLVM 15.0.6)
	conformanceVersion = 1.3.1.1
"""
RADEON = """GPU{n}:
	apiVersion         = 1.3.255
	driverVersion      = 23.2.1
	vendorID           = 0x1002
	deviceID           = 0x744c
	deviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
	deviceName         = AMD Radeon RX 7900 XTX (RADV NAVI31)
	driverID           = DRIVER_ID_MESA_RADV
	driverName         = radv
	driverInfo         = Mesa 23.2.1-1ubuntu3
	conformanceVersion = 1.3.0.0
"""


def vulkaninfo(*devices: str) -> str:
    body = VULKAN_HEAD + "".join(d.format(n=i) for i, d in enumerate(devices))
    return f"""[ "$1" = --summary ] || exit 1
cat <<'EOF'
{body}EOF"""


GLSLC = """cat <<'EOF'
shaderc v2023.8 v2023.8
spirv-tools v2023.6 v2023.6
glslang 11.1.0-763-g76b52ebf

Target: SPIR-V 1.0
EOF"""
ROCMINFO = """cat <<'EOF'
*******
Agent 2
*******
  Name:                    gfx90a
  Uuid:                    GPU-1e3a6d8a5c7b2e41
  Marketing Name:          AMD Instinct MI210
EOF"""
HIPCC = """echo "HIP version: 6.0.32830-d62f6a171"
echo "AMD clang version 17.0.0"
"""
MAC_UNAME = """case "$1" in -s) echo Darwin ;; -m) echo arm64 ;; *) echo Darwin ;; esac"""


class Shell:
    """Runs lib.sh functions with only the stubs and the listed system tools on PATH."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.tools = tmp_path / "tools"
        self.include = tmp_path / "include"
        for folder in (self.bin, self.tools):
            folder.mkdir()
        for name in SYSTEM_TOOLS:
            found = shutil.which(name)
            assert found, f"{name} is needed to run lib.sh"
            (self.tools / name).symlink_to(found)
        self.env: dict[str, str] = {
            "PATH": f"{self.bin}:{self.tools}",
            "HOME": str(tmp_path),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "SIMI_CUDA_DEFAULT_HOME": str(tmp_path / "no-cuda"),
            "SIMI_INCLUDE_DIR": str(self.include),
            "ROCM_PATH": str(tmp_path / "no-rocm"),
            "LANG": "C.UTF-8",
        }

    def stub(self, name: str, body: str, folder: Path | None = None) -> Path:
        path = (folder or self.bin) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # a system tool's link (uname) is replaced, not written
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return path

    def vulkan_headers(self, patch: int = 275) -> None:
        vulkan = self.include / "vulkan"
        vulkan.mkdir(parents=True, exist_ok=True)
        (vulkan / "vulkan.h").write_text('#include "vulkan_core.h"\n')
        (vulkan / "vulkan_core.h").write_text(
            f"#define VK_HEADER_VERSION {patch}\n"
            "#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, 1, 3, VK_HEADER_VERSION)\n"
        )
        spirv = self.include / "spirv" / "unified1"
        spirv.mkdir(parents=True, exist_ok=True)
        (spirv / "spirv.hpp").write_text("// SPIR-V\n")

    def run(self, call: str, **env: str) -> subprocess.CompletedProcess[str]:
        script = f"set -euo pipefail; source '{ROOT}/scripts/lib.sh'; {call}"
        return subprocess.run(
            ["/bin/bash", "-c", script],
            env={**self.env, **env},
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=30,
        )

    def choose(self, **env: str) -> tuple[str, str]:
        done = self.run("choose_llama_backend", **env)
        assert done.returncode == 0, done.stderr
        backend, reason = done.stdout.rstrip("\n").split("\t")
        return backend, reason


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


def test_nvidia_gpu_and_nvcc_choose_cuda(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    sh.stub("nvcc", nvcc("12.4"))
    assert sh.choose() == ("cuda", "NVIDIA H200 found and nvcc 12.4")
    # CUDA's usual homes count too, not only PATH
    (sh.bin / "nvcc").rename(sh.tmp / "nvcc")
    sh.stub("nvcc", nvcc("12.6"), sh.tmp / "cuda" / "bin")
    assert sh.choose(CUDA_HOME=str(sh.tmp / "cuda")) == ("cuda", "NVIDIA H200 found and nvcc 12.6")
    assert sh.choose(SIMI_CUDA_DEFAULT_HOME=str(sh.tmp / "cuda"))[0] == "cuda"


def test_nvidia_gpu_without_nvcc_is_not_cuda_and_says_why(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    backend, reason = sh.choose()
    assert backend == "cpu"
    assert "NVIDIA H200 found but nvcc is missing" in reason
    assert "CUDA_HOME" in reason


def test_no_gpu_at_all_is_cpu(sh: Shell) -> None:
    assert sh.choose() == ("cpu", "no GPU found")
    # nvidia-smi without a driver fails: still no GPU, and no error under `set -e`
    sh.stub("nvidia-smi", 'echo "NVIDIA-SMI has failed because it could not communicate"; exit 9')
    sh.stub("vulkaninfo", "echo 'Cannot create Vulkan instance.' >&2; exit 1")
    assert sh.choose() == ("cpu", "no GPU found")


def test_software_vulkan_device_only_is_cpu(sh: Shell) -> None:
    sh.stub("vulkaninfo", vulkaninfo(LLVMPIPE))
    sh.stub("glslc", GLSLC)
    sh.vulkan_headers()
    backend, reason = sh.choose()
    assert backend == "cpu"
    assert "llvmpipe (LLVM 15.0.6, 256 bits), a software (CPU) device" in reason


def test_real_vulkan_gpu_with_glslc_and_headers_is_vulkan(sh: Shell) -> None:
    sh.stub("vulkaninfo", vulkaninfo(RADEON, LLVMPIPE))
    sh.stub("glslc", GLSLC)
    sh.vulkan_headers(275)
    assert sh.choose() == (
        "vulkan",
        "Vulkan GPU AMD Radeon RX 7900 XTX (RADV NAVI31) found and glslc shaderc v2023.8 "
        "v2023.8 headers 1.3.275",
    )


def test_vulkan_build_needs_missing_and_no_apt_is_cpu(sh: Shell) -> None:
    sh.stub("vulkaninfo", vulkaninfo(RADEON))
    sh.stub("id", "echo 1000")  # not root, no sudo, no apt-get on this PATH
    backend, reason = sh.choose()
    assert backend == "cpu"
    assert "needs glslc libvulkan-dev spirv-headers, which apt cannot install here" in reason
    # with apt (as root) they are installable: Vulkan, and the reason says what apt adds
    sh.stub("id", "echo 0")
    sh.stub("apt-get", "exit 0")
    sh.stub("apt-cache", 'echo "libvulkan-dev:"; echo "  Candidate: 1.3.275.0-1"')
    assert sh.choose() == (
        "vulkan",
        "Vulkan GPU AMD Radeon RX 7900 XTX (RADV NAVI31) found "
        "(apt will install glslc libvulkan-dev spirv-headers)",
    )
    # Debian 12's apt has 1.3.239: that builds (patched); Ubuntu 22.04's 1.3.204 was never tried
    sh.stub("apt-cache", 'echo "libvulkan-dev:"; echo "  Candidate: 1.3.239.0-1"')
    assert sh.choose()[0] == "vulkan"
    sh.stub("apt-cache", 'echo "libvulkan-dev:"; echo "  Candidate: 1.3.204.1-2"')
    backend, reason = sh.choose()
    assert backend == "cpu" and "Vulkan headers are 1.3.204" in reason


def test_debian_12_vulkan_headers_build_and_older_ones_are_cpu(sh: Shell) -> None:
    # Debian 12's 1.3.239 builds once scripts/vulkan-old-headers.py guards ggml-vulkan's
    # VK_EXT_layer_settings (1.3.272); nothing older was ever tried: no 11-minute gamble
    sh.stub("vulkaninfo", vulkaninfo(RADEON))
    sh.stub("glslc", GLSLC)
    sh.vulkan_headers(239)
    assert sh.choose()[0] == "vulkan"
    sh.vulkan_headers(204)  # Ubuntu 22.04's
    backend, reason = sh.choose()
    assert backend == "cpu"
    assert "Vulkan headers are 1.3.204 and llama.cpp needs 1.3.239 or newer" in reason


def test_rocm_gfx_agent_and_hipcc_choose_hip(sh: Shell) -> None:
    sh.stub("rocminfo", ROCMINFO)
    assert sh.choose()[0] == "cpu"  # no hipcc yet
    sh.stub("hipcc", HIPCC)
    assert sh.choose() == ("hip", "AMD gfx90a found and hipcc 6.0.32830-d62f6a171")


def test_apple_silicon_is_metal(sh: Shell) -> None:
    sh.stub("uname", MAC_UNAME)
    assert sh.choose() == ("metal", "Apple Silicon (macOS on arm64)")


def test_cuda_wins_over_vulkan_and_forced_backend_wins_over_all(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    sh.stub("nvcc", nvcc())
    sh.stub("vulkaninfo", vulkaninfo(RADEON))
    sh.stub("glslc", GLSLC)
    sh.vulkan_headers()
    assert sh.choose()[0] == "cuda"
    assert sh.choose(SIMI_LLAMA_BACKEND="cpu") == ("cpu", "SIMI_LLAMA_BACKEND=cpu")
    assert sh.choose(SIMI_LLAMA_BACKEND="vulkan") == ("vulkan", "SIMI_LLAMA_BACKEND=vulkan")
    wrong = sh.run("choose_llama_backend", SIMI_LLAMA_BACKEND="opencl")
    assert wrong.returncode == 2 and "use auto, cpu, cuda, vulkan, hip or metal" in wrong.stderr


def test_cmake_args_per_backend(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    sh.stub("rocminfo", ROCMINFO)

    def args(backend: str, **env: str) -> str:
        return sh.run(f"llama_cmake_args {backend}", **env).stdout.strip()

    assert args("cpu") == ""
    assert args("cpu", CMAKE_ARGS="-DGGML_BLAS=on") == "-DGGML_BLAS=on"
    assert args("cuda") == "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90"
    assert args("vulkan") == "-DGGML_VULKAN=on"
    assert args("hip") == "-DGGML_HIP=on -DGPU_TARGETS=gfx90a"
    assert args("metal") == "-DGGML_METAL=on"
    (sh.bin / "nvidia-smi").unlink()
    assert args("cuda") == "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=native"


def test_wheel_cache_key_holds_backend_and_toolkit_version(sh: Shell) -> None:
    flags = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

    def key(backend: str, cmake: str = "") -> str:
        done = sh.run(f"llama_wheel_key {backend} '{flags}' '{cmake}'")
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    # a CPU build keeps the key it had before backends were chosen: no rebuild
    machine = subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout
    cpu_flags = (
        next(
            (
                line + "\n"
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("flags")
            ),
            "",
        )
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    before = hashlib.sha256(f"{machine}{cpu_flags}{flags} \n".encode()).hexdigest()[:16]
    assert key("cpu") == before
    sh.stub("nvcc", nvcc("12.4"))
    cuda_124 = key("cuda", "-DGGML_CUDA=on")
    sh.stub("nvcc", nvcc("12.6"))
    cuda_126 = key("cuda", "-DGGML_CUDA=on")
    sh.stub("glslc", GLSLC)
    vulkan = key("vulkan", "-DGGML_VULKAN=on")
    assert len({before, cuda_124, cuda_126, vulkan}) == 4
    assert key("cuda", "-DGGML_CUDA=on") == cuda_126  # stable


# A pip that fails CUDA builds the way a broken toolkit does, builds anything else into -w, and
# records what it did; a python whose `import llama_cpp` works once a wheel was installed.
FAKE_PIP = """echo "$1 CMAKE_ARGS=$CMAKE_ARGS $*" >> "{log}"
case "$1" in
  wheel)
    case "$CMAKE_ARGS" in *{fail}*)
      echo "  error: subprocess-exited-with-error"
      echo "      CMake Error at vendor/llama.cpp/ggml/src/ggml-cuda/CMakeLists.txt:43 (message):"
      echo ""
      echo "        CUDA Toolkit not found"
      exit 1 ;;
    esac
    while [ $# -gt 0 ]; do [ "$1" = -w ] && dir=$2; shift; done
    tag=cpu; case "$CMAKE_ARGS" in *GGML_CUDA*) tag=cuda ;; esac
    : > "$dir/llama_cpp_python-0.3.36+$tag-cp311-cp311-linux_x86_64.whl" ;;
  install)
    for a in "$@"; do case "$a" in *.whl) echo "$a" > "{venv}/installed" ;; esac; done ;;
esac"""
FAKE_PYTHON = """[ -f "{venv}/installed" ] || exit 1
case "$(cat "{venv}/installed")" in *{broken}*) exit 1 ;; esac"""


def fake_venv(sh: Shell, fail: str = "NOTHING", broken: str = "NOTHING") -> Path:
    venv = sh.tmp / "venv"
    log = sh.tmp / "pip.log"
    sh.stub("pip", FAKE_PIP.format(log=log, fail=fail, venv=venv), venv / "bin")
    sh.stub("python", FAKE_PYTHON.format(venv=venv, broken=broken), venv / "bin")
    return venv


def test_failed_gpu_build_falls_back_to_the_cpu_build_with_one_line(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    sh.stub("nvcc", nvcc())
    venv = fake_venv(sh, fail="GGML_CUDA")
    done = sh.run("install_llama_cpp", SIMI_VENV=str(venv))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "llama.cpp failed" in line]
    assert len(lines) == 1, done.stdout
    [line] = lines
    assert "The CUDA build of llama.cpp failed (CMake Error at" in line
    assert "CUDA Toolkit not found" in line and "build.log" in line
    assert "SIMI_LLAMA_BACKEND=cuda" in line and "SIMI_LLAMA_BACKEND=cpu" in line
    assert "+cpu-" in (venv / "installed").read_text()  # a working CPU install, not nothing
    marker = (venv / ".llama-cpp-built-here").read_text().strip()
    assert marker == Path((venv / "installed").read_text().strip()).parent.name  # the CPU key
    # the next run does not try the CUDA build again (11 minutes each time): it says so once
    pip_log = (sh.tmp / "pip.log").read_text()
    again = sh.run("install_llama_cpp", SIMI_VENV=str(venv))
    assert again.returncode == 0, again.stderr
    assert "failed before" in again.stdout and "SIMI_LLAMA_BACKEND=cuda" in again.stdout
    assert (sh.tmp / "pip.log").read_text() == pip_log  # nothing built or installed
    # asked for by name, it is tried again
    retry = sh.run("install_llama_cpp", SIMI_VENV=str(venv), SIMI_LLAMA_BACKEND="cuda")
    assert "The CUDA build of llama.cpp failed" in retry.stdout


def test_gpu_build_that_does_not_import_falls_back_too(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    sh.stub("nvcc", nvcc())
    venv = fake_venv(sh, broken="+cuda-")  # built, but libcuda is not there at run time
    done = sh.run("install_llama_cpp", SIMI_VENV=str(venv))
    assert done.returncode == 0, done.stderr
    assert "does not load here" in done.stdout
    assert "+cpu-" in (venv / "installed").read_text()


def test_gpu_build_that_works_is_installed_and_remembered(sh: Shell) -> None:
    sh.stub("nvidia-smi", NVIDIA_SMI)
    sh.stub("nvcc", nvcc())
    venv = fake_venv(sh)
    done = sh.run("install_llama_cpp", SIMI_VENV=str(venv))
    assert done.returncode == 0, done.stderr
    assert "llama.cpp backend: CUDA (NVIDIA H200 found and nvcc 12.4)" in done.stdout
    assert "+cuda-" in (venv / "installed").read_text()
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in (sh.tmp / "pip.log").read_text()
    pip_log = (sh.tmp / "pip.log").read_text()
    assert sh.run("install_llama_cpp", SIMI_VENV=str(venv)).stdout == ""  # installed already
    assert (sh.tmp / "pip.log").read_text() == pip_log
    # forcing the CPU build installs that one (the marker's key differs)
    cpu = sh.run("install_llama_cpp", SIMI_VENV=str(venv), SIMI_LLAMA_BACKEND="cpu")
    assert cpu.returncode == 0 and "+cpu-" in (venv / "installed").read_text()


def test_cpu_install_from_before_backends_is_left_alone(sh: Shell) -> None:
    # an install made before the marker held a key: an empty marker, a CPU build
    venv = fake_venv(sh)
    (venv / "installed").write_text("llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl")
    (venv / ".llama-cpp-built-here").write_text("")
    done = sh.run("install_llama_cpp", SIMI_VENV=str(venv))
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    assert not (sh.tmp / "pip.log").exists()  # nothing rebuilt, nothing reinstalled


def test_scripts_are_clean_bash() -> None:
    scripts = [
        "scripts/lib.sh",
        "scripts/install-and-run",
        "scripts/test",
        "scripts/gpu-proof",
        "scripts/test-gpu-path",
    ]
    for script in scripts:
        assert subprocess.run(["bash", "-n", str(ROOT / script)]).returncode == 0
    if shutil.which("shellcheck"):
        done = subprocess.run(
            ["shellcheck", "-x", *scripts], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout


# A pip whose `download` makes an sdist holding a ggml-vulkan.cpp shaped like llama.cpp's
# (instance created with layer settings) and whose `wheel` keeps the source it was given.
SDIST_PIP = """case "$1" in
  download)
    while [ $# -gt 0 ]; do [ "$1" = -d ] && dir=$2; shift; done
    src="$dir/llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/src/ggml-vulkan"
    mkdir -p "$src"
    cp "{cpp}" "$src/ggml-vulkan.cpp"
    tar -czf "$dir/llama_cpp_python-0.3.36.tar.gz" -C "$dir" llama_cpp_python-0.3.36
    rm -r "$dir/llama_cpp_python-0.3.36" ;;
  wheel)
    for a in "$@"; do last=$a; done
    echo "wheel from $last CMAKE_ARGS=$CMAKE_ARGS" >> "{log}"
    cat "$last/vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp" >> "{log}"
    while [ $# -gt 0 ]; do [ "$1" = -w ] && dir=$2; shift; done
    : > "$dir/llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl" ;;
esac"""


def test_a_vulkan_wheel_is_built_from_the_sdist_patched_for_older_headers(sh: Shell) -> None:
    import sys

    from tests.test_vulkan_old_headers import SHAPED_LIKE_LLAMA_CPP

    for tool in ("tar", "gzip", "mktemp", "rm", "cp", "find"):
        (sh.tools / tool).symlink_to(shutil.which(tool) or tool)
    cpp = sh.tmp / "ggml-vulkan.cpp"
    cpp.write_text(SHAPED_LIKE_LLAMA_CPP)
    venv, log = sh.tmp / "venv", sh.tmp / "pip.log"
    sh.stub("pip", SDIST_PIP.format(cpp=cpp, log=log), venv / "bin")
    sh.stub("python", f'exec "{sys.executable}" "$@"', venv / "bin")
    done = sh.run('llama_wheel vulkan "$(portable_cmake_args)"', SIMI_VENV=str(venv))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl")
    built = log.read_text()
    assert "-DGGML_NATIVE=OFF" in built and "-DGGML_VULKAN=on" in built
    assert "#ifdef VK_EXT_layer_settings" in built  # pip built the patched source
    # the second call takes the cached wheel: nothing built
    again = sh.run('llama_wheel vulkan "$(portable_cmake_args)"', SIMI_VENV=str(venv))
    assert again.stdout == done.stdout.splitlines()[-1] + "\n" and log.read_text() == built
    # a CPU build still comes straight from PyPI, unpatched
    assert sh.run("llama_wheel cpu", SIMI_VENV=str(venv)).returncode == 0
    assert "wheel from llama-cpp-python>=0.3.9,<0.4 CMAKE_ARGS=\n" in log.read_text()
