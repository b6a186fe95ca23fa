"""The record of one model call: ``CallStats``, one typed field per ``inference_stats`` column.

The call path builds it once, when the call ends (``chat/call.py`` ``ModelCall.stats``: the
clock's figures and whose call it was, in one construction by ``StatsClock.stats``, then its
price by ``dataclasses.replace``), stores ``as_row()`` (``store/stats.py``) and hands the record
itself to its callers (``Turn.stats``, ``Turn.calls``, ``OneShot.stats``). A name that is not a
column is a type error. Rows read back from SQLite (history: the dashboard, exports, the
timeline of a stored reply) stay dicts with the same keys; ``as_row()`` is that dict.

Every field is defined in docs/statistics.md; the types are the schema's (REAL: float,
INTEGER: int, TEXT: str), None where the column may be NULL.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypedDict


class CallPlace(TypedDict, total=False):
    """Where a call stood, besides whose it was: a turn's message, conversation, index and the
    tools it asked for; a prompt-set run; an API client's call (``source`` 'api', the key's
    name). What is not given is None in the record."""

    message_id: int | None
    conversation_id: int | None
    prompt_run_id: int | None
    call_index: int | None
    tool_calls: int | None
    tool_ms: float | None
    source: str | None
    api_client: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallStats:
    """One model call's ``inference_stats`` row, fields in ``STATS_COLUMNS`` order."""

    # m001: whose call, the outcome, times, tokens, speeds, cost, context and load
    message_id: int | None
    conversation_id: int | None
    agent_id: int | None
    agent_name: str
    provider_kind: str
    endpoint_host: str | None
    model_requested: str | None
    model_reported: str | None
    started_at: str
    queued_ms: float | None
    connect_ms: float | None
    headers_ms: float | None
    ttft_ms: float | None
    prefill_ms: float | None
    decode_ms: float | None
    total_ms: float | None
    prompt_tokens: int | None
    cached_tokens: int | None
    prompt_eval_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None
    token_source: str | None
    prefill_tok_s: float | None
    decode_tok_s: float | None
    finish_reason: str | None
    error_kind: str | None
    cost_usd: float | None
    price_source: str | None
    context_window: int | None
    context_fill: float | None
    n_gpu_layers: int | None
    n_ctx: int | None
    n_threads: int | None
    kv_type: str | None
    flash_attn: int | None
    backend: str | None
    load_ms: float | None
    model_file_size: int | None
    quantization: str | None
    # m005: the timeline, the cost's parts
    worker_start_ms: float | None
    tls_ms: float | None
    reused_connection: int | None
    stream_ms: float | None
    timing_source: str | None
    prefill_source: str | None
    kv_cache_bytes: int | None
    cost_input_usd: float | None
    cost_cached_usd: float | None
    cost_output_usd: float | None
    # m007: a prompt-set run's call
    prompt_run_id: int | None
    # m008: the prompt cache
    cache_source: str | None
    cache_restore_ms: float | None
    # m010: an agentic turn's calls and the tools each asked for
    call_index: int | None
    tool_calls: int | None
    tool_ms: float | None
    # m012: where a local call ran
    device: str | None
    offloaded_layers: str | None
    vram_bytes: int | None
    # m013: a call a client made through the local API server, and the key it used
    source: str | None
    api_client: str | None
    # m014: what the call's images took (reported, or estimated from their sizes: 1) and,
    # locally, how long the vision projector took to encode them
    image_tokens: int | None
    image_tokens_estimated: int | None
    image_encode_ms: float | None
    # m015: the knowledge search before the call (a turn whose agent searches collections)
    retrieval_ms: float | None = None
    retrieval_embed_ms: float | None = None
    retrieval_search_ms: float | None = None
    retrieval_read_ms: float | None = None
    retrieval_chunks: int | None = None
    retrieval_tokens: int | None = None

    def as_row(self) -> dict[str, Any]:
        """The record as the stored row's dict: every column (``STATS_COLUMNS``, in order)."""
        return {name: getattr(self, name) for name in FIELDS}


# The field names in order: the stats columns (``store/stats.py`` ``STATS_COLUMNS``).
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CallStats))
