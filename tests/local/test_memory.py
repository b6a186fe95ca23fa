"""Memory estimates against what llama.cpp itself reports when it loads the starter model."""

from __future__ import annotations

import pytest

from desktop.local.catalog import read_model_info
from desktop.local.engine import LocalEngine
from desktop.local.loading import LLAMA_REPORTED_MIB, LoadParams, capture_llama_logs
from desktop.local.memory import estimate
from tests.helpers import gguf_files

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def starter_info():
    return read_model_info(gguf_files.starter())


@pytest.mark.parametrize(
    ("n_ctx", "kv_type", "flash_attn"),
    [(512, "f16", False), (2048, "q8_0", True), (1000, None, False)],
)
def test_kv_cache_estimate_matches_llama_cpp(starter_info, n_ctx, kv_type, flash_attn) -> None:
    capture_llama_logs()  # llama.cpp logs "llama_kv_cache: size = X MiB" while loading
    engine = LocalEngine()
    try:
        engine.ensure_loaded(
            LoadParams(
                str(gguf_files.starter()), n_ctx=n_ctx, kv_type=kv_type, flash_attn=flash_attn
            )
        )
        reported = dict(LLAMA_REPORTED_MIB)
    finally:
        engine.unload()
    est = estimate(starter_info, n_ctx, kv_type, 0, flash_attn=flash_attn)
    assert est.kv_cache / MIB == pytest.approx(reported["kv_cache"], rel=0.05)
    # the compute buffer is a documented approximation: within 10 % on this model
    assert est.compute / MIB == pytest.approx(reported["compute"], rel=0.10)
    # weights: the file's tensors (llama.cpp maps the file; the header is the difference)
    assert est.weights / MIB == pytest.approx(reported["weights"], rel=0.10)
    assert est.vram == 0 and est.ram == est.total


def test_gpu_layers_move_weights_and_kv_to_the_gpu(starter_info) -> None:
    cpu = estimate(starter_info, 4096, "f16", 0)
    half = estimate(starter_info, 4096, "f16", 15)
    full = estimate(starter_info, 4096, "f16", -1)
    assert half.kv_gpu == half.kv_cpu == cpu.kv_cache / 2
    assert 0 < half.weights_gpu < full.weights_gpu and full.kv_cpu == 0
    assert full.gpu_layers == 31 and full.weights_cpu >= starter_info.embedding_bytes
    # a CPU-only build ignores n_gpu_layers, and so does the estimate
    assert estimate(starter_info, 4096, "f16", -1, gpu_offload=False).vram == 0


def test_quantized_kv_is_smaller_by_block_size(starter_info) -> None:
    f16 = estimate(starter_info, 8192, "f16").kv_cache
    assert estimate(starter_info, 8192, "q8_0").kv_cache == pytest.approx(f16 * 34 / 64)
    assert estimate(starter_info, 8192, "q4_0").kv_cache == pytest.approx(f16 * 18 / 64)


def test_all_layers_on_the_gpu_match_what_llama_cpp_put_there(starter_info) -> None:
    """The starter with every layer on a GPU, against llama.cpp's own load report: Vulkan
    (lavapipe, tests/local/test_placement.py's VULKAN_LOAD) put 92.10 MiB of weights, 45.00 of
    KV cache and 98.30 of compute buffers on Vulkan0; CUDA on an NVIDIA H200 (scripts/gpu-proof,
    2026-12-04) 245,670,871 bytes in all. The starter has no head of its own: llama.cpp loads
    a second copy of the token embeddings onto the GPU as its head, and the estimate counts it
    (without it the weights there came to 63.4 MiB and the whole to 212, under both)."""
    assert starter_info.output_tied
    full = estimate(starter_info, 2048, "f16", -1)
    assert full.weights_gpu / MIB == pytest.approx(92.10, rel=0.01)
    assert full.kv_gpu / MIB == pytest.approx(45.00, rel=0.01)
    assert full.vram / MIB == pytest.approx(92.10 + 45.00 + 98.30, rel=0.05)
    assert full.vram == pytest.approx(245_670_871, rel=0.05)
    # the first copy stays in RAM for the input; with the head on the CPU there is no second
    assert full.weights_cpu >= starter_info.embedding_bytes
    layers_only = estimate(starter_info, 2048, "f16", starter_info.block_count)
    assert layers_only.weights_gpu == sum(starter_info.layer_bytes)


def test_a_model_with_its_own_head_is_not_counted_twice(starter_info) -> None:
    from dataclasses import replace

    own_head = replace(starter_info, output_tied=False)
    tied = estimate(starter_info, 2048, "f16", -1)
    untied = estimate(own_head, 2048, "f16", -1)
    assert tied.weights_gpu - untied.weights_gpu == starter_info.embedding_bytes
    assert tied.weights_cpu == untied.weights_cpu


def test_the_first_part_of_a_split_file_is_not_taken_for_a_tied_model(tmp_path) -> None:
    """A split file's first part lists only its own tensors: a head in a later part must not
    be counted as a second copy of the embeddings."""
    part = gguf_files.rewrite_starter(tmp_path / "m-00001-of-00002.gguf", set_kv={"split.count": 2})
    assert not read_model_info(part).output_tied
