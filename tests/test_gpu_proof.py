"""scripts/gpu-proof (issue 26 item 5), as far as a machine without a GPU can run it: the
measuring part on the installed CPU build, the build-and-install plumbing with stub tools, and
the generated model that stands in for the starter there."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bench.gguf_synth import fill, write_head
from bench.gpu_proof import KEYS, all_layers_offloaded
from desktop.local.gguf import read_header
from tests.helpers import gguf_files
from tests.helpers.cli import run_text

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-proof"
NUMBERS = [k for k in KEYS if k.endswith(("_gpu", "_cpu"))]


@pytest.mark.slow
def test_measure_only_on_the_cpu_build_prints_exactly_the_keys() -> None:
    tiny = ("--tokens", "3", "--prompt-tokens", "24", "--runs", "1", "--threads", "1")
    done = run_text(
        [str(SCRIPT), "--measure-only", "--no-gpu", *tiny],
        {**os.environ, "PYTHON": sys.executable},
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert tuple(result) == KEYS
    # no GPU here: the all-layers pass ran on the CPU, and the figures say so
    assert (result["backend"], result["device"], result["offloaded_layers"]) == (
        "CPU",
        "CPU",
        "0/31",
    )
    for key in NUMBERS:
        assert isinstance(result[key], int | float) and result[key] > 0, (key, result)
    details = json.loads(done.stderr.strip().splitlines()[-1])
    assert details["cpu_pass"] == {"device": "CPU", "offloaded": "0/31"}
    assert details["vram_bytes"] == 0
    # what the app makes of this machine: a CPU build, so a new local agent gets no GPU layers
    app = details["app"]
    assert app["auto_gpu_layers"] == 0 and app["vram_free"] is None, app
    assert "CPU only" in app["summary"], app
    assert app["estimated_vram_bytes"] == 0, app


def test_a_cpu_figure_never_passes_for_a_gpu_one() -> None:
    assert all_layers_offloaded({"offloaded_layers": "31/31"})
    for layers in ("0/31", "12/31", None, ""):
        assert not all_layers_offloaded({"offloaded_layers": layers})


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _fake_llama_wheel(dest: Path) -> Path:
    """A wheel of a llama_cpp module that says it offloads (what a CUDA build says)."""
    wheel = dest / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    info = "llama_cpp_python-0.3.36.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(
            "llama_cpp/__init__.py",
            "__version__ = '0.3.36'\ndef llama_supports_gpu_offload():\n    return True\n",
        )
        zf.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: 0.3.36\n"
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            "Tag: py3-none-linux_x86_64\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def test_build_takes_the_gpus_architecture_and_installs_beside_the_carried_wheels(
    tmp_path: Path,
) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    proof = tmp_path / "proof"
    carry = proof / "carry"
    (carry / "wheels").mkdir(parents=True)
    source = io.BytesIO(b"# llama.cpp would be here\n")
    with tarfile.open(carry / "llama-cpp-python-0.3.36-src.tar.xz", "w:xz") as tar:
        entry = tarfile.TarInfo("llama_cpp_python-0.3.36/CMakeLists.txt")
        entry.size = len(source.getvalue())
        tar.addfile(entry, source)
    made = _fake_llama_wheel(tmp_path)
    log = tmp_path / "cmake-args"
    _stub(
        stubs,
        "nvidia-smi",
        'case "$1" in --query-gpu=compute_cap) echo "9.0" ;; '
        '-L) echo "GPU 0: NVIDIA H200 (UUID: GPU-1)" ;; esac',
    )
    _stub(stubs, "nvcc", 'echo "Cuda compilation tools, release 13.0, V13.0.88"')
    # python: `-m pip wheel` is the CUDA build (records its CMAKE_ARGS, "builds" the wheel);
    # anything else is the real interpreter
    _stub(
        stubs,
        "python",
        f"""if [ "$1 $2 $3" = "-m pip wheel" ]; then
  echo "$CMAKE_ARGS" > "{log}"
  while [ $# -gt 0 ]; do [ "$1" = -w ] && dir=$2; shift; done
  mkdir -p "$dir" && cp "{made}" "$dir/"
  exit 0
fi
exec "{sys.executable}" "$@"
""",
    )
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "PYTHON": str(stubs / "python"),
        "SIMI_GPU_PROOF_DIR": str(proof),
        "CUDA_HOME": str(tmp_path / "cuda"),  # cuBLAS "beside nvcc": no pip fallback
    }
    (tmp_path / "cuda" / "include").mkdir(parents=True)
    (tmp_path / "cuda" / "include" / "cublas_v2.h").write_text("")
    done = run_text([str(SCRIPT), "--build-only"], env)
    assert done.returncode == 0, done.stderr
    args = log.read_text()
    assert "-DGGML_CUDA=on" in args and "-DCMAKE_CUDA_ARCHITECTURES=90" in args
    assert "-DGGML_CUDA_FA=OFF" in args  # SIMI loads with flash_attn off: kernels left out
    assert "building llama-cpp-python 0.3.36 for sm_90 with nvcc 13.0" in done.stderr
    assert (proof / "site" / "llama_cpp" / "__init__.py").exists()
    assert "installed: 0.3.36" in done.stderr
    # a rerun reuses the wheel: no second build
    log.unlink()
    again = run_text([str(SCRIPT), "--build-only"], env)
    assert again.returncode == 0, again.stderr
    assert not log.exists() and "building" not in again.stderr


@pytest.mark.slow
def test_generated_model_has_the_starters_shape_and_never_stops_early(tmp_path: Path) -> None:
    import llama_cpp

    head = tmp_path / "head.gguf"
    size = write_head(gguf_files.starter(), head)
    assert head.stat().st_size == size < 2_000_000  # what travels: the header alone
    model = tmp_path / "synth.gguf"
    assert fill(head, model) == gguf_files.starter().stat().st_size
    ours, theirs = read_header(model), read_header(gguf_files.starter())
    assert ours.metadata == theirs.metadata and ours.tensors == theirs.tensors
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=256, n_threads=1, verbose=False)
    prompt = llm.tokenize(b"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", special=True)
    out: Any = llm.create_completion(prompt, max_tokens=24, temperature=0.0, stop=[])
    assert out["usage"]["completion_tokens"] == 24  # end-of-text tokens are never picked
    assert out["choices"][0]["finish_reason"] == "length"
    llm.close()
