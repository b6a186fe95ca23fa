"""Stats rows for the timeline tests (the Qt-free model and the panel): realistic figures of
a local first call with the starter model and of a llama.cpp server with its own timings."""

from __future__ import annotations

from typing import Any

MIB = 1024 * 1024

# A local first call with the starter model: worker start, model load, prefill, decode.
LOCAL_FIRST: dict[str, Any] = {
    "provider_kind": "local",
    "model_reported": "SmolLM2-135M-Instruct",
    "backend": "CPU",
    "started_at": "2026-12-01T11:16:16.123+00:00",
    "worker_start_ms": 450.0,
    "load_ms": 140.0,
    "prefill_ms": 80.0,
    "prompt_eval_tokens": 40,
    "prompt_tokens": 40,
    "cached_tokens": 0,
    "ttft_ms": 690.0,
    "stream_ms": 1985.0,
    "decode_ms": 1983.3,
    "total_ms": 2700.0,
    "output_tokens": 120,
    "token_source": "reported",
    "decode_tok_s": 60.0,
    "prefill_tok_s": 500.0,
    "prefill_source": "measured",
    "timing_source": "llama.cpp",
    "kv_cache_bytes": 48 * MIB,
    "kv_type": "f16",
    "context_window": 2048,
    "context_fill": 0.0781,
    "n_ctx": 2048,
    "n_gpu_layers": 0,
    "n_threads": 4,
    "flash_attn": 0,
    "quantization": "Q8_0",
    "finish_reason": "stop",
    "price_source": "local",
    "cost_usd": 0.0,
    "agent_name": "SmolLM2 (local)",
}

# A llama.cpp server on the network, with its own timings, priced from the dataset.
REMOTE_SERVER: dict[str, Any] = {
    "provider_kind": "openai-compatible",
    "endpoint_host": "gpu-box.lan",
    "model_requested": "qwen2.5-7b-instruct",
    "model_reported": "qwen2.5-7b-instruct-q4_k_m.gguf",
    "started_at": "2026-12-01T11:20:04.512+00:00",
    "connect_ms": 3.0,
    "reused_connection": 0,
    "headers_ms": 40.0,
    "ttft_ms": 420.0,
    "prefill_ms": 300.0,
    "decode_ms": 1500.0,
    "timing_source": "server",
    "prompt_eval_tokens": 1200,
    "prompt_tokens": 1450,
    "cached_tokens": 250,
    "output_tokens": 90,
    "stream_ms": 1510.0,
    "total_ms": 1940.0,
    "decode_tok_s": 59.3,
    "prefill_tok_s": 4000.0,
    "prefill_source": "measured",
    "token_source": "reported",
    "context_window": 8192,
    "context_fill": 0.188,
    "finish_reason": "stop",
    "cost_usd": 0.00042,
    "cost_input_usd": 0.0003,
    "cost_cached_usd": 2e-05,
    "cost_output_usd": 0.0001,
    "price_source": "genai-prices",
    "agent_name": "Box llama",
}
