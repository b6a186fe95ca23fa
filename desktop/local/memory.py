"""How much memory a model will take before it is loaded (from its GGUF header alone).

Three parts, each split between system RAM and GPU memory:

* **weights**: the file's tensors. ``n_gpu_layers`` repeating layers (``blk.N``) go to the
  GPU; llama.cpp offloads the *last* layers first, and so does the estimate. The token embeddings
  always stay in RAM; the output head joins the GPU when all layers are offloaded
  (``n_gpu_layers`` > block count, or -1). A model without a head of its own (tied
  embeddings) uses the token embeddings as its head, and llama.cpp loads a second copy of
  them onto the GPU then (the starter: 92.1 MiB of weights there, not 63.4).
* **KV cache**: ``2 (K and V) x layers x cells x kv_heads x head_dim x bytes per element``;
  cells = n_ctx rounded up to 256 (llama.cpp pads the cache); f16 = 2 bytes, q8_0 = 34 bytes
  per 32 elements, q4_0 = 18 per 32. Each offloaded layer keeps its KV on the GPU. This
  matches the "llama_kv_cache: size = ..." line llama.cpp logs (checked in the tests).
* **compute buffers**: an approximation of ggml's graph allocator peak. The two largest
  intermediate tensors are the output logits (n_ubatch x n_vocab x 4 bytes) and, without flash
  attention, the attention scores of one layer (n_ubatch x cells x n_head x 4 bytes); the peak
  is the larger of the two plus 15 % of the attention scores plus two activations of
  n_ubatch x n_embd x 4 bytes. Within ~5 % of what llama.cpp 0.3.36 reports on CPU for the
  starter model; a GPU backend adds its own overheads (CUDA context ~300 MiB) not counted here.
"""

from __future__ import annotations

from dataclasses import dataclass

from desktop.local.catalog import ModelInfo

KV_CELL_PADDING = 256
# bytes per element of the KV cache types offered in the agent editor (ggml type_traits)
KV_BYTES_PER_ELEMENT = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "f32": 4.0}
DEFAULT_UBATCH = 512  # llama-cpp-python's n_ubatch default; llama.cpp uses min(n_batch, it)


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes, by part and by place. ``gpu_layers`` is the number of layers offloaded."""

    weights_cpu: int
    weights_gpu: int
    kv_cpu: int
    kv_gpu: int
    compute_cpu: int
    compute_gpu: int
    kv_cells: int
    gpu_layers: int
    block_count: int

    @property
    def weights(self) -> int:
        return self.weights_cpu + self.weights_gpu

    @property
    def kv_cache(self) -> int:
        return self.kv_cpu + self.kv_gpu

    @property
    def compute(self) -> int:
        return self.compute_cpu + self.compute_gpu

    @property
    def ram(self) -> int:
        return self.weights_cpu + self.kv_cpu + self.compute_cpu

    @property
    def vram(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu

    @property
    def total(self) -> int:
        return self.ram + self.vram


def kv_cells(n_ctx: int) -> int:
    return max(KV_CELL_PADDING, -(-n_ctx // KV_CELL_PADDING) * KV_CELL_PADDING)


def kv_bytes_per_layer(info: ModelInfo, n_ctx: int, kv_type: str | None = None) -> float:
    per_element = KV_BYTES_PER_ELEMENT[kv_type or "f16"]
    heads_kv = info.head_count_kv or info.head_count or 0
    k_dim = info.key_length or 0
    v_dim = info.value_length or 0
    return kv_cells(n_ctx) * heads_kv * (k_dim + v_dim) * per_element


def offloaded_layers(info: ModelInfo, n_gpu_layers: int | None, gpu_offload: bool) -> int:
    blocks = info.block_count or 0
    if not gpu_offload or not n_gpu_layers:
        return 0
    if n_gpu_layers < 0:
        return blocks + 1
    return min(n_gpu_layers, blocks + 1)


def estimate(
    info: ModelInfo,
    n_ctx: int,
    kv_type: str | None = None,
    n_gpu_layers: int | None = 0,
    *,
    n_batch: int = 512,
    flash_attn: bool = False,
    gpu_offload: bool = True,
) -> MemoryEstimate:
    """Estimate memory for loading ``info`` with these parameters.

    ``gpu_offload``: whether the installed build can offload at all
    (``desktop.local.gpu.detect().gpu_offload``); without it everything is in RAM, as
    llama.cpp itself ignores n_gpu_layers then.
    """
    if n_ctx <= 0:
        raise ValueError("n_ctx must be positive")
    if (kv_type or "f16") not in KV_BYTES_PER_ELEMENT:
        raise ValueError(f"unknown KV cache type {kv_type!r}")
    blocks = info.block_count or 0
    on_gpu = offloaded_layers(info, n_gpu_layers, gpu_offload)
    gpu_blocks = min(on_gpu, blocks)
    # layers are the same size; llama.cpp offloads from the last one down
    layer_sizes = list(info.layer_bytes) or [0] * blocks
    weights_gpu = sum(layer_sizes[blocks - gpu_blocks :]) if gpu_blocks else 0
    output_on_gpu = on_gpu > blocks
    if output_on_gpu:
        weights_gpu += info.output_bytes
    weights_cpu = info.file_size - weights_gpu  # embeddings, the rest, and the header
    weights_cpu = max(weights_cpu, 0)
    if output_on_gpu and info.output_tied:
        # the head is the token embeddings: a second copy on the GPU, the first stays in RAM
        weights_gpu += info.embedding_bytes

    per_layer_kv = kv_bytes_per_layer(info, n_ctx, kv_type)
    kv_gpu = round(per_layer_kv * gpu_blocks)
    kv_cpu = round(per_layer_kv * (blocks - gpu_blocks))

    compute = compute_buffer_bytes(info, n_ctx, n_batch=n_batch, flash_attn=flash_attn)
    if on_gpu:
        # the graph runs where the layers are; the CPU keeps a host copy of inputs/outputs
        ubatch = min(n_batch, DEFAULT_UBATCH)
        host = ubatch * ((info.embedding_length or 0) + (info.vocab_size or 0)) * 4
        compute_cpu, compute_gpu = host, compute
    else:
        compute_cpu, compute_gpu = compute, 0
    return MemoryEstimate(
        weights_cpu=weights_cpu,
        weights_gpu=weights_gpu,
        kv_cpu=kv_cpu,
        kv_gpu=kv_gpu,
        compute_cpu=compute_cpu,
        compute_gpu=compute_gpu,
        kv_cells=kv_cells(n_ctx),
        gpu_layers=on_gpu,
        block_count=blocks,
    )


def compute_buffer_bytes(
    info: ModelInfo, n_ctx: int, *, n_batch: int = 512, flash_attn: bool = False
) -> int:
    """The documented approximation of llama.cpp's compute buffer (see the module doc)."""
    ubatch = min(n_batch, DEFAULT_UBATCH)
    logits = ubatch * (info.vocab_size or 0) * 4
    scores = 0 if flash_attn else ubatch * kv_cells(n_ctx) * (info.head_count or 0) * 4
    activations = 2 * ubatch * (info.embedding_length or 0) * 4
    return int(max(logits, scores) + 0.15 * scores + activations)


def gpu_layers_for(
    info: ModelInfo,
    n_ctx: int,
    gpu_offload: bool,
    vram_free: int | None,
    kv_type: str | None = "f16",
    *,
    n_batch: int = 512,
    flash_attn: bool = False,
) -> int:
    """The GPU layers a new local agent gets when nobody chose them: -1 (all layers) when the
    build offloads and the whole model's GPU estimate fits ``vram_free`` (the free memory of
    the real GPUs, ``desktop.local.pool.gpu_memory``; a software device such as llvmpipe has
    none), else 0. One rule for every new agent: "New agent from this model", a blank one in
    the editor, the starter."""
    if not gpu_offload or vram_free is None:
        return 0
    need = estimate(
        info, n_ctx, kv_type, -1, n_batch=n_batch, flash_attn=flash_attn, gpu_offload=True
    )
    return -1 if need.vram <= vram_free else 0


def format_bytes(n: float) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 100 * size else f"{n / size:.0f} {unit}"
    return f"{int(n)} B"
