"""GPU support detection and the out-of-GPU-memory retry (this machine is CPU-only)."""

from __future__ import annotations

import threading

import llama_cpp
import pytest

from desktop.llm.errors import LocalModelError
from desktop.llm.events import RunInfo
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.engine import LocalEngine
from desktop.local.gpu import architecture_supported, backend_name, detect
from desktop.local.loading import LLAMA_LOG_TAIL, LoadParams
from tests.helpers import gguf_files


def test_detect_reports_the_installed_build() -> None:
    support = detect()
    assert support.available
    assert support.gpu_offload == bool(llama_cpp.llama_supports_gpu_offload())
    assert support.backend == ("CPU" if not support.gpu_offload else support.backend)
    assert any(d.kind == "CPU" for d in support.devices)  # ggml always registers the CPU
    assert support.llama_cpp_version == llama_cpp.__version__
    assert support.backend in support.summary or "CPU only" in support.summary


def test_stats_name_the_backend_detect_names() -> None:
    # what a local call's RunInfo says (and its stats row records) is what detect() says
    assert backend_name() == detect(with_devices=False).backend
    if not llama_cpp.llama_supports_gpu_offload():
        assert backend_name() == "CPU"


def test_architecture_check_knows_llama_and_not_nonsense() -> None:
    assert architecture_supported("llama") is True
    assert architecture_supported("nonesuch") is False


class SmallGpu:
    """Stands in for a GPU whose memory holds at most ``fits`` layers: a loader that fails the
    way llama.cpp's CUDA backend does (log line + ValueError) and otherwise loads for real."""

    def __init__(self, fits: int | None) -> None:
        self.fits = fits
        self.asked: list[int] = []

    def __call__(self, **kwargs):
        layers = kwargs["n_gpu_layers"]
        self.asked.append(layers)
        if self.fits is None or layers < 0 or layers > self.fits:
            LLAMA_LOG_TAIL.append(
                "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 812.00 MiB on device "
                "0: cudaMalloc failed: out of memory"
            )
            raise ValueError(f"Failed to load model from file: {kwargs['model_path']}")
        return llama_cpp.Llama(**kwargs)


def _run_info(engine: LocalEngine, params: LoadParams) -> RunInfo:
    request = ChatRequest("m", (ChatMessage("user", "Hi"),), Sampling(max_tokens=2, seed=1))
    return next(
        e for e in engine.generate(params, request, threading.Event()) if isinstance(e, RunInfo)
    )


def test_out_of_gpu_memory_halves_layers_and_says_so() -> None:
    gpu = SmallGpu(fits=8)
    engine = LocalEngine(loader=gpu)
    params = LoadParams(str(gguf_files.starter()), n_ctx=256, n_gpu_layers=-1)
    try:
        info = _run_info(engine, params)
        report = engine.loaded.report  # what the worker sends the app after the load
    finally:
        engine.unload()
    assert gpu.asked == [-1, 15, 7]  # all (30 layers + output = 31) -> 15 -> 7
    assert info.load_params["n_gpu_layers"] == 7
    assert info.notice and "Not enough GPU memory for all layers" in info.notice
    assert "7 layers on the GPU" in info.notice
    # the Models page's Load hears it too (its message and the "GPU note" fact)
    assert report.gpu_layers == 7 and report.note and "7 layers on the GPU" in report.note
    assert report.model_path == params.model_path


def test_no_gpu_memory_at_all_falls_back_to_cpu() -> None:
    gpu = SmallGpu(fits=0)
    engine = LocalEngine(loader=gpu)
    try:
        info = _run_info(engine, LoadParams(str(gguf_files.starter()), n_ctx=256, n_gpu_layers=20))
    finally:
        engine.unload()
    assert gpu.asked == [20, 10, 5, 2, 1, 0]
    assert "the CPU only" in (info.notice or "")


def test_other_load_failures_are_not_retried() -> None:
    asked: list[int] = []

    def broken(**kwargs):  # stands in for llama.cpp rejecting the file for another reason
        asked.append(kwargs["n_gpu_layers"])
        LLAMA_LOG_TAIL.append("llama_model_load: error loading model: bad tensor")
        raise ValueError("Failed to load model from file")

    engine = LocalEngine(loader=broken)
    with pytest.raises(LocalModelError, match="bad tensor"):
        engine.ensure_loaded(LoadParams(str(gguf_files.starter()), n_gpu_layers=-1))
    assert asked == [-1]


def test_the_files_metadata_listed_in_the_log_is_not_taken_for_the_complaint() -> None:
    """llama.cpp lists a file's metadata before it fails; a key named like a complaint
    ("unknown_token_id") is not what went wrong."""
    from desktop.local.loading import llama_complaint

    LLAMA_LOG_TAIL.clear()
    LLAMA_LOG_TAIL.append("llama_model_loader: - kv  28: tokenizer.ggml.unknown_token_id u32 = 0")
    LLAMA_LOG_TAIL.append("print_info: unknown token id = 0")
    LLAMA_LOG_TAIL.append("llama_model_load: error loading model: key not found: n_embd")
    assert llama_complaint() == "key not found: n_embd"
