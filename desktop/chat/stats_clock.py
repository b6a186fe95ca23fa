"""The stats clock: what happened during one model call, as its ``CallStats`` record.

Every figure is computed here once: the stored row, the line under a reply and the live rate
on the status line while a reply streams all read this clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Unpack, assert_never

from desktop.chat.call_stats import CallPlace, CallStats
from desktop.llm import events as ev


def _ms(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round((end - start) * 1000, 2)


def _round(value: float | None) -> float | None:
    return round(value, 2) if value is not None else None


def _int(value: object) -> int | None:
    """A load parameter that is a count (the worker sends ints; anything else is unknown)."""
    return value if isinstance(value, int) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def token_rate(tokens: int | None, seconds: float | None) -> float | None:
    """Decode speed: the first token ends the prefill, so ``tokens - 1`` over the time from
    the first token to the last (ARCHITECTURE.md: decode tok/s = (output − 1) / decode time)."""
    if not tokens or tokens < 2 or not seconds or seconds <= 0:
        return None
    return round((tokens - 1) / seconds, 2)


# A speed measured on our side needs a stream to measure: at least this many separate
# arrivals of text, over at least this long. A reply that came in one piece (not streamed,
# or buffered by a proxy) has no decode speed rather than an absurd one.
MIN_CHUNKS_FOR_RATE = 3
MIN_SPAN_FOR_RATE_S = 0.05
# An estimate of prefill speed from TTFT means something only for a prompt this long: below
# it, the round trip and the server's queue are most of the TTFT.
MIN_TOKENS_FOR_PREFILL_ESTIMATE = 256


class StatsClock:
    """Collects the events of one call; ``stats()`` turns them into its ``CallStats``."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.started = clock()
        self.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self.first_token: float | None = None
        self.last_token: float | None = None
        self.tokens = 0  # model tokens of text and reasoning seen (TextDelta.tokens)
        self.chunks = 0  # separate arrivals of text or reasoning
        self.reasoning_streamed = 0  # of which reasoning (ReasoningDelta)
        self.queued_at: float | None = None
        self.queued_ms: float | None = None
        self.queue_reason = ""
        # what the call waits for before it is made: "searching Notes" (an agent's knowledge
        # search, ``chat/knowledge.retrieve``); None otherwise
        self.searching: str | None = None
        self.prefill_progress: ev.PrefillProgress | None = None  # the latest, while it runs
        self.prefill_first: ev.PrefillProgress | None = None  # and when it came: the pace
        self.prefill_started: float | None = None
        self.usage = ev.Usage(source="counted")
        self.timing = ev.Timing()
        self.info = ev.RunInfo()
        # the images' prompt tokens as estimated from their sizes (None: no image was sent);
        # the row holds it, marked estimated, unless the backend reports its own count
        self.image_estimate: int | None = None

    def images_sent(self, estimate: int | None) -> None:
        """The call sends images taking about ``estimate`` prompt tokens (None: none)."""
        self.image_estimate = estimate

    def on_event(self, event: ev.StreamEvent) -> None:
        match event:
            case ev.TextDelta() | ev.ReasoningDelta():
                now = self._clock()
                if self.first_token is None:
                    self.first_token = now
                self.last_token = now
                self.chunks += 1
                if isinstance(event, ev.TextDelta):
                    self.tokens += event.tokens
                else:
                    self.tokens += 1
                    self.reasoning_streamed += 1
            case ev.Usage() as usage:
                self.usage = usage
            case ev.Timing() as timing:
                self.timing = ev.Timing(
                    **{
                        name: getattr(timing, name)
                        if getattr(timing, name) is not None
                        else getattr(self.timing, name)
                        for name in ev.Timing.__slots__
                    }
                )
            case ev.RunInfo() as info:
                self.info = info
            case ev.Queued(waiting=True) as queued:
                self.queued_at, self.queue_reason = self._clock(), queued.reason
            case ev.Queued():
                self.queued_ms = _ms(self.queued_at, self._clock())
                self.queued_at = None
            case ev.PrefillProgress() as progress:
                if self.prefill_first is None:
                    self.prefill_first, self.prefill_started = progress, self._clock()
                self.prefill_progress = progress
            case ev.ToolCall():  # model output too: a reply may be only a call
                now = self._clock()
                if self.first_token is None:
                    self.first_token = now
                self.last_token = now
            case ev.Finished():
                pass
            case _:
                assert_never(event)

    def now(self) -> float:
        return self._clock()

    @property
    def waiting_in_queue(self) -> bool:
        """The call waits for a shared backend (``queue_reason`` says which)."""
        return self.queued_at is not None

    def waiting_for(self, *, remote: bool, loading_model: bool = False) -> str | None:
        """What the call waits for before its first token, in words, with the time so far
        ("connecting · 3 s", "reading the prompt: 512 of 2,048 tokens · about 4 s left");
        None once tokens flow."""
        if self.first_token is not None:
            return None
        now = self._clock()
        waited = now - self.started
        since = f" · {waited:.0f} s" if waited >= 1 else ""
        progress = self.prefill_progress
        if self.searching:
            what = self.searching
        elif self.waiting_in_queue:
            what = f"queued: {self.queue_reason}"
        elif loading_model:
            what = "loading the model"
        elif progress is not None and progress.total:
            what = f"reading the prompt: {progress.evaluated:,} of {progress.total:,} tokens"
            first = self.prefill_first
            done = progress.evaluated - (first.evaluated if first is not None else 0)
            spent = now - (self.prefill_started or now)
            if done > 0 and spent > 0.5 and progress.evaluated < progress.total:
                left = (progress.total - progress.evaluated) * spent / done
                what += f" · about {left:.0f} s left"
        elif remote and self.timing.headers_ms is None:
            what = "connecting"
        else:
            what = "waiting for the first token"
        return what + since

    def _streamed_span(self) -> float | None:
        """Seconds from the first text to the last, when the stream allows a rate at all."""
        if self.first_token is None or self.last_token is None:
            return None
        span = self.last_token - self.first_token
        if self.chunks < MIN_CHUNKS_FOR_RATE or span < MIN_SPAN_FOR_RATE_S:
            return None
        return span

    def live_decode_tok_s(self) -> float | None:
        """The decode speed so far, by the same formula as the stored figure."""
        return token_rate(self.tokens, self._streamed_span())

    def _decode_tok_s(self, output: int | None) -> float | None:
        """The backend's own figure when it gave one (its eval count over its decode time);
        else the tokens that streamed over the time they took. Reasoning the backend counted
        but never streamed (hidden thinking) took no streaming time: it is left out."""
        timing = self.timing
        if timing.decode_ms and timing.decode_tokens:
            return round(timing.decode_tokens / (timing.decode_ms / 1000), 2)
        if timing.decode_ms:
            return token_rate(output, timing.decode_ms / 1000)
        span = self._streamed_span()
        if span is None:
            return None
        streamed = output
        hidden = (self.usage.reasoning_tokens or 0) if not self.reasoning_streamed else 0
        if streamed is not None and hidden:
            streamed = max(streamed - hidden, 0)
        return token_rate(streamed, span)

    def _prefill(self, ttft_ms: float | None) -> tuple[float | None, str | None]:
        """Prefill speed and how it was found: the backend's own counters ("measured"), else
        for a long enough prompt the new prompt tokens over TTFT less connecting
        ("estimated": TTFT also holds the round trip and any queue, so the true speed is at
        least this)."""
        timing, usage = self.timing, self.usage
        if timing.prefill_ms and timing.prompt_eval_tokens:
            return round(timing.prompt_eval_tokens / (timing.prefill_ms / 1000), 2), "measured"
        if usage.prompt_tokens is None or usage.source != "reported" or not ttft_ms:
            return None, None
        new = usage.prompt_tokens - (usage.cached_tokens or 0)
        spent_ms = ttft_ms - (timing.connect_ms or 0) - (self.queued_ms or 0)
        if new < MIN_TOKENS_FOR_PREFILL_ESTIMATE or spent_ms <= 0:
            return None, None
        return round(new / (spent_ms / 1000), 2), "estimated"

    def stats(
        self,
        finish_reason: str,
        error_kind: str | None = None,
        *,
        agent_id: int | None,
        agent_name: str,
        provider_kind: str,
        endpoint_host: str | None,
        model_requested: str | None,
        **place: Unpack[CallPlace],
    ) -> CallStats:
        """The call's record, once it ended: the figures of its events and whose call it was
        (``ModelCall.stats`` says; it prices the record after). A reported cost is kept as
        the price (``price_source`` 'reported'); the cost's parts wait for pricing."""
        end = self._clock()
        output = self.usage.output_tokens
        source = self.usage.source
        if output is None and self.tokens:
            output, source = self.tokens, "counted"
        timing = self.timing
        decode_tok_s = self._decode_tok_s(output)
        ttft_ms = _ms(self.started, self.first_token)
        prefill_tok_s, prefill_source = self._prefill(ttft_ms)
        prompt = self.usage.prompt_tokens
        info = self.info
        window = info.context_window
        fill = None
        if window and prompt is not None:
            fill = round((prompt + (output or 0)) / window, 4)
        params = info.load_params
        image_tokens, image_estimated = self.usage.image_tokens, None
        if image_tokens is not None:
            image_estimated = 0
        elif self.image_estimate is not None:
            image_tokens, image_estimated = self.image_estimate, 1
        return CallStats(
            message_id=place.get("message_id"),
            conversation_id=place.get("conversation_id"),
            agent_id=agent_id,
            agent_name=agent_name,
            provider_kind=provider_kind,
            endpoint_host=endpoint_host,
            model_requested=model_requested,
            model_reported=info.model_reported,
            started_at=self.started_at,
            queued_ms=self.queued_ms,
            connect_ms=timing.connect_ms,
            headers_ms=_round(timing.headers_ms),
            ttft_ms=ttft_ms,
            prefill_ms=_round(timing.prefill_ms),
            decode_ms=_round(timing.decode_ms)
            if timing.decode_ms is not None
            else _ms(self.first_token, self.last_token),
            total_ms=_ms(self.started, end),
            prompt_tokens=prompt,
            cached_tokens=self.usage.cached_tokens,
            prompt_eval_tokens=timing.prompt_eval_tokens,
            output_tokens=output,
            reasoning_tokens=self.usage.reasoning_tokens,
            token_source=source if (prompt is not None or output is not None) else None,
            prefill_tok_s=prefill_tok_s,
            decode_tok_s=decode_tok_s,
            finish_reason=finish_reason,
            error_kind=error_kind,
            cost_usd=self.usage.cost_usd,
            price_source="reported" if self.usage.cost_usd is not None else None,
            context_window=window,
            context_fill=fill,
            n_gpu_layers=_int(params.get("n_gpu_layers")),
            n_ctx=_int(params.get("n_ctx")),
            n_threads=_int(params.get("n_threads")),
            kv_type=_text(params.get("kv_type")) or ("f16" if params else None),
            flash_attn=int(bool(params.get("flash_attn"))) if params else None,
            backend=info.backend,
            load_ms=_round(timing.load_ms),
            model_file_size=info.model_file_size,
            quantization=info.quantization,
            worker_start_ms=_round(timing.worker_start_ms),
            tls_ms=_round(timing.tls_ms),
            reused_connection=None if timing.reused is None else int(timing.reused),
            stream_ms=_ms(self.first_token, self.last_token),
            timing_source=timing.reported_by,
            prefill_source=prefill_source,
            kv_cache_bytes=info.kv_cache_bytes,
            cost_input_usd=None,
            cost_cached_usd=None,
            cost_output_usd=None,
            prompt_run_id=place.get("prompt_run_id"),
            cache_source=self.usage.cache_source,
            cache_restore_ms=_round(timing.cache_restore_ms),
            call_index=place.get("call_index"),
            tool_calls=place.get("tool_calls"),
            tool_ms=place.get("tool_ms"),
            device=info.device,
            offloaded_layers=info.offloaded_layers,
            vram_bytes=info.vram_bytes,
            source=place.get("source"),
            api_client=place.get("api_client"),
            image_tokens=image_tokens,
            image_tokens_estimated=image_estimated,
            image_encode_ms=_round(timing.image_encode_ms),
        )
