"""One model call drawn to scale: ``build_timeline(row)`` turns an ``inference_stats`` row into
the segments, markers and facts the reply timeline panel shows. Qt-free.

All times are on the client's axis, in ms from Send (the row's definition). A local call reads
queued → starting the worker → loading the model → restoring the prompt cache (a memory-cached
or saved state; the facts say where the cached tokens came from) → prefill (llama.cpp's
counters) → other → first token → decode → done; a remote one connect (TCP) / TLS (or "reused
connection") → waiting for the answer to begin (headers) → waiting for the first token →
streaming → done.
Where a server reports its own prefill and decode (``timing_source`` 'server') they are drawn
in a second lane inside the client's span, and the rest of that span is "network and queue".
A local call that sent images has its vision projector's encoding in that second lane instead
("Image encoding"), from where the prompt's reading begins.
An agent's knowledge search, before the call, is a lane of its own from Send (embedding the
question, searching, reading the passages); the call's own lane begins where it ends.
A missing figure draws nothing and is said to be missing; a negative gap is drawn as nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from desktop.chat.timeline_facts import (
    CostParts,
    Fact,
    Gauge,
    TokenSplit,
    as_float,
    as_int,
    context_gauge,
    cost_parts,
    facts,
    is_local,
    ms_text,
    provider_name,
    started_text,
    token_split,
)
from desktop.chat.timeline_lanes import (
    IMAGE_LANE_LABEL,
    MIN_GAP_MS,
    RETRIEVAL_LANE_LABEL,
    Builder,
    Marker,
    Segment,
    decode,
    gap_to_first_token,
    image_lane,
    local_start,
    remote_start,
    retrieval_lane,
    server_lane,
)

ERROR_WORDS = {
    "auth": "the key was refused",
    "rate_limited": "the provider limited requests",
    "context_too_long": "the conversation was too long for the model's context",
    "model_not_found": "the model was not found",
    "unavailable": "the server could not be reached",
    "stalled": "the stream stalled",
    "bad_response": "the server's answer could not be read",
    "local_model": "the local model failed",
}


@dataclass(frozen=True, slots=True)
class Timeline:
    title: str
    subtitle: str
    provider: str
    outcome: str
    summary: str  # where the wait before the first token went, in one sentence
    span_ms: float  # the axis: 0 .. span_ms
    segments: tuple[Segment, ...]
    server_segments: tuple[Segment, ...]
    markers: tuple[Marker, ...]
    client_lane_label: str
    server_lane_label: str
    facts: tuple[Fact, ...]
    tokens: TokenSplit
    context: Gauge | None
    kv_cache_bytes: int | None
    cost: CostParts
    notes: tuple[str, ...] = field(default=())
    # an agent's knowledge search before the call: a lane of its own, from Send
    retrieval_segments: tuple[Segment, ...] = field(default=())
    retrieval_lane_label: str = ""

    def fact(self, key: str) -> Fact | None:
        return next((f for f in self.facts if f.key == key), None)

    def segment(self, key: str) -> Segment | None:
        every = (*self.retrieval_segments, *self.segments, *self.server_segments)
        return next((s for s in every if s.key == key), None)

    def as_text(self) -> str:
        """The whole panel as plain text (Copy as text)."""
        lines = [f"Reply timeline: {self.title}"]
        lines += [line for line in (self.subtitle, self.outcome, self.summary) if line]
        if self.retrieval_segments:
            lines += ["", self.retrieval_lane_label]
            lines += [
                f"  {_clock(s.start_ms)}  {s.label}: {s.figure}" for s in self.retrieval_segments
            ]
        lines += ["", self.client_lane_label]
        lines += [f"  {_clock(s.start_ms)}  {s.label}: {s.figure}" for s in self.segments]
        lines += [f"  {_clock(m.at_ms)}  {m.label}: {m.figure}" for m in self.markers]
        if self.server_segments:
            lines += ["", self.server_lane_label]
            lines += [
                f"  {_clock(s.start_ms)}  {s.label}: {s.figure}" for s in self.server_segments
            ]
        lines.append("")
        lines += [f"{f.label}: {f.value}" for f in self.facts]
        if self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines)


def _clock(ms: float) -> str:
    return f"at {ms_text(ms):>8}"


def build_timeline(row: dict[str, Any] | None) -> Timeline:
    """The timeline of one stats row (complete, cancelled, failed, or an old row with NULLs)."""
    row = dict(row or {})
    provider = provider_name(row)
    local = is_local(row)
    ttft = as_float(row.get("ttft_ms"))
    total = as_float(row.get("total_ms"))
    finish = str(row.get("finish_reason") or "")
    notes: list[str] = []
    lane = Builder()
    markers: list[Marker] = []
    search = retrieval_lane(row)  # an agent's knowledge search, before the call
    lane.at = search.at  # the call's own parts begin where it ended
    if local:
        local_start(row, lane)
    else:
        remote_start(row, lane, markers, provider)
    before_first = lane.at

    first_at: float | None = None
    if ttft is not None:
        if ttft + MIN_GAP_MS < lane.at:
            notes.append(
                f"The measured parts add up to {ms_text(lane.at)}, more than the time to first "
                f"token ({ms_text(ttft)}): they overlapped, and are drawn one after another."
            )
        gap_to_first_token(row, lane, ttft, local, provider)
        first_at = max(ttft, lane.at)
        markers.append(
            Marker(
                "first_token",
                "first token",
                first_at,
                ms_text(ttft),
                f"The first word of the reply arrived {ms_text(ttft)} after you pressed Send "
                "(TTFT: time to first token).",
            )
        )
        decode(row, lane, first_at, local, provider)
    elif total is not None:
        why = {"cancelled": "until you stopped it", "error": "until the call failed"}
        lane.until(
            total,
            "no_first_token",
            "waiting for the first token",
            "wait",
            "No reply text arrived " + why.get(finish, "before the call ended") + ".",
        )
    if total is not None:
        lane.until(
            total,
            "finishing",
            "finishing",
            "finish",
            "After the last token: the end of the stream, the final counts, and the reply "
            "being saved."
            if finish != "error"
            else "From the last token until the call failed.",
        )
    end = max(total if total is not None else 0.0, lane.at)
    if total is not None or lane.segments:
        key = {"cancelled": "stopped", "error": "failed"}.get(finish, "done")
        words = {"stopped": "stopped by you", "failed": "failed", "done": "done"}[key]
        figure = ms_text(total) if total is not None else "total not recorded"
        markers.append(
            Marker(key, words, end, figure, f"The call ended ({words}) here: {figure} after Send.")
        )

    server = server_lane(row, first_at, end, notes) if first_at is not None else []
    second_label = f"Inside the server: {provider}'s own timings" if server else ""
    if local:  # the second lane: the images' encoding, from where the prompt's reading began
        reading = next((s.start_ms for s in lane.segments if s.key == "prefill"), before_first)
        server = image_lane(row, reading)
        second_label = IMAGE_LANE_LABEL if server else ""
    span = max([end, *(s.end_ms for s in server)]) if (lane.segments or server or markers) else 0.0
    ttft_fact = Fact(
        "ttft",
        "Time to first token",
        ms_text(ttft) if ttft is not None else _no_first_token(finish),
        known=ttft is not None,
        description="TTFT: from the moment the request was sent to the first content token "
        "received.",
    )
    total_fact = Fact(
        "total",
        "Total time",
        ms_text(total) if total is not None else "not recorded for this call",
        known=total is not None,
        description="From Send to the end of the reply.",
    )
    model = row.get("model_reported") or row.get("model_requested") or ""
    title = " · ".join(str(p) for p in (row.get("agent_name"), model) if p) or "Reply"
    where = "local model on this computer" if local else f"remote: {provider}"
    return Timeline(
        title=title,
        subtitle=" · ".join(p for p in (where, started_text(row)) if p),
        provider=provider,
        outcome=_outcome(row, finish, total),
        summary=_summary([*search.segments, *lane.segments], server, ttft, before_first),
        span_ms=span,
        segments=tuple(lane.segments),
        server_segments=tuple(server),
        retrieval_segments=tuple(search.segments),
        retrieval_lane_label=RETRIEVAL_LANE_LABEL if search.segments else "",
        markers=tuple(sorted(markers, key=lambda m: m.at_ms)),
        client_lane_label=(
            "On this computer (timed by SIMI Multi; prefill and decode by llama.cpp)"
            if local
            else "What you waited for (SIMI Multi's clock)"
        ),
        server_lane_label=second_label,
        facts=facts(row, ttft_fact, total_fact),
        tokens=token_split(row),
        context=context_gauge(row),
        kv_cache_bytes=as_int(row.get("kv_cache_bytes")) if local else None,
        cost=cost_parts(row),
        notes=tuple(notes),
    )


# words ----------------------------------------------------------------------------------------
def _no_first_token(finish: str) -> str:
    if finish == "cancelled":
        return "none: you stopped the call before the first token"
    if finish == "error":
        return "none: the call failed before the first token"
    return "not recorded for this call"


def _outcome(row: dict[str, Any], finish: str, total: float | None) -> str:
    after = f" after {ms_text(total)}" if total is not None else ""
    if finish == "error":
        why = ERROR_WORDS.get(str(row.get("error_kind") or ""), "")
        return f"Failed{after}" + (f": {why}." if why else ".")
    return {
        "stop": f"Finished{after}: the model ended its reply.",
        "length": f"Stopped at the length limit{after} (the agent's max tokens, or the "
        "context was full).",
        "cancelled": f"Stopped by you{after}.",
    }.get(finish, f"Ended{after}." if total is not None else "")


def _summary(
    segments: list[Segment], server: list[Segment], ttft: float | None, before_first: float
) -> str:
    """Where most of the wait before the first token went, when one part stands out."""
    if not ttft:
        return ""
    until = max(ttft, before_first)
    waiting = [s for s in segments if s.end_ms <= until + MIN_GAP_MS and s.kind != "decode"]
    if not waiting:
        return ""
    first_call = [s for s in waiting if s.key in ("worker_start", "load")]
    startup = sum(s.duration_ms for s in first_call)
    others = [s for s in waiting if s not in first_call]
    biggest_other = max((s.duration_ms for s in others), default=0.0)
    if startup / until >= 0.3 and startup >= biggest_other:
        parts = " and ".join(s.label for s in first_call)
        return (
            f"{parts[0].upper()}{parts[1:]} took {ms_text(startup)} of the {ms_text(ttft)} "
            f"wait for the first token ({startup / until:.0%}). Only the first call pays "
            "this: the next replies start sooner."
        )
    biggest = max(waiting, key=lambda s: s.duration_ms)
    share = biggest.duration_ms / until
    if share < 0.3:
        return ""
    what = biggest.label
    if biggest.key == "first_token_wait":
        what = "the server working on the prompt before its first token"
    text = (
        f"Most of the wait for the first token ({ms_text(ttft)}) was {what}: "
        f"{ms_text(biggest.duration_ms)}, {share:.0%} of it."
    )
    prefill = next((s for s in server if s.key == "server_prefill"), None)
    if biggest.key == "first_token_wait" and prefill is not None:
        spent = prefill.figure.split(" · ")[0]
        text += f" The server says {spent} of that was reading the prompt (prefill)."
    return text
