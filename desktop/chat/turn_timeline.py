"""An agentic turn drawn to scale: ``build_turn_timeline(calls, steps)`` turns a reply's model
calls (its ``inference_stats`` rows, ``call_index`` 1, 2, …) and its tool calls
(``desktop.store.tool_steps.ToolStep``) into the parts of the turn in order and its totals.
Qt-free.

The axis is the turn's own, in ms from the first call's start (``started_at``): call 1 (its
``total_ms``) → the tools it asked for (each its ``duration_ms``) → call 2 … A step has no time
of its own on the axis, only a duration: the tools of a round are laid one after another from
the end of the call that asked for them. The time between a call's end and the next call's
``started_at`` that the tools do not account for is named: "waiting for your approval" when a
person was asked in that round, else "between calls" (results saved and sent). A call that
never ran (denied, refused, invalid, or no time recorded) is an instant: a marker with its
status. Without a usable ``started_at`` the parts are laid end to end with nothing between.

Each call's own timeline (TTFT, prefill, decode…) is ``desktop.chat.timeline.build_timeline``
of its row (``TurnTimeline.call_timelines``); ``TurnTimeline.chart`` is the turn as a
``Timeline`` the reply-timeline chart draws with its usual lanes (kinds "call", "tool",
"wait", "gap").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from desktop.chat.format import cost_text, finish_words, stats_line
from desktop.chat.timeline import Timeline, build_timeline
from desktop.chat.timeline_facts import CostParts, TokenSplit, as_float, as_int, ms_text
from desktop.chat.timeline_lanes import MIN_GAP_MS, Marker, Segment

# A step that ran (or tried to): it has a duration. The others never ran: instants.
STATUS_WORDS = {
    "done": "done",
    "error": "failed",
    "timeout": "timed out",
    "denied": "denied by you",
    "invalid": "not run: the model's call was invalid",
    "refused": "refused: over the turn's limit, or no one could approve it",
    "cancelled": "stopped",
    "asked": "asked",
    "waiting": "waiting for approval",
    "running": "running",
}
ASKED = frozenset({"once", "always", "denied"})  # a person was asked (not granted, not auto)


@dataclass(frozen=True, slots=True)
class TurnPart:
    """One part of the turn: a model call, a tool call, or the time between them.

    ``start_ms`` on the turn's axis; ``duration_ms`` None for an instant (a tool call that
    never ran, a call with no time recorded)."""

    key: str
    kind: str  # "call", "tool", "wait" (approval), "gap" (between calls)
    label: str
    start_ms: float
    duration_ms: float | None
    figure: str
    status: str
    description: str
    call_index: int | None = None

    @property
    def instant(self) -> bool:
        return self.duration_ms is None

    @property
    def end_ms(self) -> float:
        return self.start_ms + (self.duration_ms or 0.0)


@dataclass(frozen=True, slots=True)
class TurnTotals:
    calls: int
    tool_calls: int
    wall_ms: float | None  # the first call's start to the last call's end
    model_ms: float  # the calls' total_ms summed
    tool_ms: float  # the tools' run time summed
    approval_ms: float  # time waiting for the person between calls
    prompt_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None  # None: unknown (a call used tokens without a price)
    local: bool  # every call on a local model: no cost

    @property
    def cost(self) -> str:
        return cost_text(self.cost_usd, "local" if self.local else None)

    def text(self) -> str:
        """ "2 model calls · 1 tool call · 4.10 s in all: 3.20 s model, 80 ms tools"."""
        parts = [_count(self.calls, "model call"), _count(self.tool_calls, "tool call")]
        split = [f"{ms_text(self.model_ms)} model"]
        if self.tool_calls:
            split.append(f"{ms_text(self.tool_ms)} tools")
        if self.approval_ms >= MIN_GAP_MS:
            split.append(f"{ms_text(self.approval_ms)} waiting for your approval")
        if self.wall_ms is not None:
            parts.append(f"{ms_text(self.wall_ms)} in all: " + ", ".join(split))
        else:
            parts.append(", ".join(split))
        return " · ".join(parts)

    def tokens_text(self) -> str:
        """ "Tokens over the calls: 2,900 in (2,400 cached) → 160 out · cost $0.0012"."""
        bits: list[str] = []
        if self.prompt_tokens is not None:
            cached = f" ({self.cached_tokens:,} cached)" if self.cached_tokens else ""
            bits.append(f"{self.prompt_tokens:,} in{cached}")
        if self.output_tokens is not None:
            bits.append(f"{self.output_tokens:,} out")
        line = "Tokens over the calls: " + " → ".join(bits) if bits else ""
        cost = "local model: no cost" if self.local else f"cost {self.cost}"
        if self.cost_usd is None and not self.local:
            cost = "cost unknown (a call has no known price)"
        return " · ".join(p for p in (line, cost) if p)


@dataclass(frozen=True, slots=True)
class TurnTimeline:
    parts: tuple[TurnPart, ...]
    totals: TurnTotals
    call_timelines: tuple[Timeline, ...]  # each call's own timeline, in call order
    chart: Timeline  # the turn for the chart: one lane of calls and tools, instants as markers
    title: str

    def part(self, key: str) -> TurnPart | None:
        return next((p for p in self.parts if p.key == key), None)

    def as_text(self) -> str:
        """The turn, then every call's own timeline (Copy as text)."""
        lines = [f"Reply timeline: {self.title}", self.totals.text(), self.totals.tokens_text()]
        lines += ["", "The turn"]
        for p in self.parts:
            status = f" ({p.status})" if p.status and p.kind == "tool" else ""
            lines.append(f"  at {ms_text(p.start_ms):>8}  {p.label}: {p.figure}{status}")
        for n, t in enumerate(self.call_timelines, start=1):
            lines += ["", f"— Call {n} of {len(self.call_timelines)} —", t.as_text()]
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _parse(when: Any) -> datetime | None:
    if not when:
        return None
    try:
        moment = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _field(step: Any, name: str, default: Any = None) -> Any:
    if isinstance(step, dict):
        return step.get(name, default)
    return getattr(step, name, default)


def _tool_name(step: Any) -> tuple[str, str]:
    return str(_field(step, "tool", "") or "tool"), str(_field(step, "server", "") or "")


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _cost(calls: Sequence[dict[str, Any]]) -> tuple[float | None, bool]:
    """The turn's cost and whether it is all local. Unknown when a call used tokens without a
    price (never summed as 0)."""
    total, local = 0.0, bool(calls)
    for row in calls:
        source = row.get("price_source")
        is_local = source == "local" or row.get("provider_kind") == "local"
        local = local and is_local
        cost = as_float(row.get("cost_usd"))
        used = row.get("prompt_tokens") is not None or row.get("output_tokens") is not None
        if cost is None or (source is None and not is_local):
            if used:
                return None, False
            continue
        total += cost
    return (0.0 if local else round(total, 9)), local


def _call_part(n: int, row: dict[str, Any], start: float, timeline: Timeline) -> TurnPart:
    total = as_float(row.get("total_ms"))
    finish = str(row.get("finish_reason") or "")
    inner: list[str] = []
    ttft = as_float(row.get("ttft_ms"))
    if ttft is not None:
        inner.append(f"first token after {ms_text(ttft)}")
    for seg in timeline.segments:
        if seg.kind in ("prefill", "decode", "load", "startup"):
            inner.append(f"{seg.label} {seg.figure}")
    asked = as_int(row.get("tool_calls"))
    if finish == "tool_calls":
        outcome = f"it asked for {_count(asked or 0, 'tool call')}"
    elif finish == "stop":
        outcome = "it wrote its answer"
    else:
        outcome = finish_words(finish) or timeline.outcome.rstrip(".") or "it ended"
    figure = ms_text(total) if total is not None else "no time recorded"
    description = f"Model call {n}: {figure}; " + (", ".join(inner) + "; " if inner else "")
    description += f"{outcome}. Choose “Call {n}” below for its own timeline."
    return TurnPart(
        f"call{n}",
        "call",
        f"call {n}",
        start,
        total if total is not None and total > 0 else None,
        figure,
        finish,
        description,
        n,
    )


def _step_part(step: Any, n: int, start: float) -> TurnPart:
    tool, server = _tool_name(step)
    status = str(_field(step, "status", "") or "")
    duration = as_float(_field(step, "duration_ms"))
    label = f"{tool} on {server}" if server else tool
    words = STATUS_WORDS.get(status, status)
    size = as_int(_field(step, "size")) or 0
    if duration is None or duration <= 0:
        figure = words
        description = f"The tool {tool}{f' on {server}' if server else ''} did not run: {words}."
        duration = None
    else:
        figure = ms_text(duration) if status == "done" else f"{ms_text(duration)} · {words}"
        description = (
            f"The tool {tool}{f' on {server}' if server else ''} ran for {ms_text(duration)}"
            f" ({words}); its result was {size:,} character{'' if size == 1 else 's'}"
            + (", cut to the size limit" if _field(step, "truncated", False) else "")
            + "."
        )
    return TurnPart(
        f"tool{n}",
        "tool",
        label,
        start,
        duration,
        figure,
        status,
        description,
        as_int(_field(step, "call_index")),
    )


def build_turn_timeline(calls: Sequence[dict[str, Any]], steps: Sequence[Any]) -> TurnTimeline:
    """The turn of ``calls`` (stats rows, in ``call_index`` order) and ``steps`` (its tool
    calls, ``ToolStep``s or dicts with the same fields, in the order asked)."""
    rows = sorted(calls, key=lambda r: as_int(r.get("call_index")) or 0)
    timelines = tuple(build_timeline(r) for r in rows)
    starts = [_parse(r.get("started_at")) for r in rows]
    origin = starts[0] if starts else None
    by_call: dict[int, list[Any]] = {}
    for step in steps:
        by_call.setdefault(as_int(_field(step, "call_index")) or 0, []).append(step)

    offsets: list[float | None] = [
        (moment - origin).total_seconds() * 1000 if moment and origin else None for moment in starts
    ]
    parts: list[TurnPart] = []
    at = 0.0
    approval = 0.0
    step_no = 0
    for i, row in enumerate(rows):
        n = as_int(row.get("call_index")) or i + 1
        part = _call_part(n, row, at, timelines[i])
        parts.append(part)
        at = part.end_ms
        round_steps = by_call.get(n, [])
        ran = sum(as_float(_field(s, "duration_ms")) or 0.0 for s in round_steps)
        following = offsets[i + 1] if i + 1 < len(rows) else None
        spare = following - at - ran if following is not None else 0.0
        asked = any(_field(s, "approval", "") in ASKED for s in round_steps)
        if spare >= MIN_GAP_MS and asked:  # the person was asked before the tools ran
            parts.append(
                TurnPart(
                    f"approval{n}",
                    "wait",
                    "waiting for your approval",
                    at,
                    spare,
                    ms_text(spare),
                    "",
                    "The turn waited for you to allow or deny the tool call"
                    f"{'' if len(round_steps) == 1 else 's'} of call {n}.",
                    n,
                )
            )
            approval += spare
            at += spare
        for step in round_steps:
            tool = _step_part(step, step_no, at)
            step_no += 1
            parts.append(tool)
            at = tool.end_ms
        if spare >= MIN_GAP_MS and not asked:
            parts.append(
                TurnPart(
                    f"between{n}",
                    "gap",
                    "between calls",
                    at,
                    spare,
                    ms_text(spare),
                    "",
                    "Not a tool's own time: the results being saved and the next call sent.",
                    n,
                )
            )
            at += spare
    # steps whose call is not among the rows (a cut-off turn): after everything
    known = {as_int(r.get("call_index")) or i + 1 for i, r in enumerate(rows)}
    for index in sorted(k for k in by_call if k not in known):
        for step in by_call[index]:
            tool = _step_part(step, step_no, at)
            step_no += 1
            parts.append(tool)
            at = tool.end_ms

    call_parts = [p for p in parts if p.kind == "call"]
    wall = call_parts[-1].end_ms - call_parts[0].start_ms if call_parts else None
    cost, local = _cost(rows)
    totals = TurnTotals(
        calls=len(rows),
        tool_calls=len(steps),
        wall_ms=wall,
        model_ms=sum(as_float(r.get("total_ms")) or 0.0 for r in rows),
        tool_ms=sum(as_float(_field(s, "duration_ms")) or 0.0 for s in steps),
        approval_ms=approval,
        prompt_tokens=_sum([as_int(r.get("prompt_tokens")) for r in rows]),
        cached_tokens=_sum([as_int(r.get("cached_tokens")) for r in rows]),
        output_tokens=_sum([as_int(r.get("output_tokens")) for r in rows]),
        cost_usd=cost,
        local=local,
    )
    agent = next((r["agent_name"] for r in rows if r.get("agent_name")), "")
    model = next(
        (
            r.get("model_reported") or r.get("model_requested")
            for r in reversed(rows)
            if r.get("model_reported") or r.get("model_requested")
        ),
        "",
    )
    title = " · ".join(str(p) for p in (agent, model) if p) or "Reply"
    return TurnTimeline(tuple(parts), totals, timelines, _chart(parts, totals, title), title)


def _chart(parts: list[TurnPart], totals: TurnTotals, title: str) -> Timeline:
    segments = tuple(
        Segment(p.key, p.label, p.start_ms, p.end_ms, p.figure, p.kind, "client", p.description)
        for p in parts
        if not p.instant
    )
    markers = [
        Marker(p.key, p.label, p.start_ms, p.figure, p.description) for p in parts if p.instant
    ]
    calls = [p for p in parts if p.kind == "call"]
    if calls and totals.wall_ms is not None:
        end = calls[-1].end_ms
        words = f"The turn's last call ended {ms_text(totals.wall_ms)} after the first began."
        markers.append(Marker("turn_done", "done", end, ms_text(totals.wall_ms), words))
    span = max([0.0, *(p.end_ms for p in parts)])
    return Timeline(
        title=title,
        subtitle="",
        provider="",
        outcome="",
        summary="",
        span_ms=span,
        segments=segments,
        server_segments=(),
        markers=tuple(sorted(markers, key=lambda m: m.at_ms)),
        client_lane_label="This turn: each model call and the tool calls between them",
        server_lane_label="",
        facts=(),
        tokens=TokenSplit(
            totals.prompt_tokens, totals.cached_tokens, None, totals.output_tokens, None
        ),
        context=None,
        kv_cache_bytes=None,
        cost=CostParts(totals.cost_usd, None, None, None, ""),
    )


# the footer -----------------------------------------------------------------------------------
def calls_suffix(calls: Sequence[dict[str, Any]], steps: Sequence[Any]) -> str:
    """ "2 calls · tools 80 ms" for a reply of several model calls; "" for one."""
    if len(calls) < 2:
        return ""
    ran = [as_float(_field(s, "duration_ms")) for s in steps]
    known = [d for d in ran if d is not None]
    text = f"{len(calls)} calls"
    if known:
        text += f" · tools {ms_text(sum(known))}"
    elif steps:
        text += f" · {_count(len(steps), 'tool call')}"
    return text


def calls_tooltip(calls: Sequence[dict[str, Any]], steps: Sequence[Any]) -> str:
    """The calls of a reply, one a line, each with the tools it asked for; "" for one call."""
    if len(calls) < 2:
        return ""
    turn = build_turn_timeline(calls, steps)
    lines = [f"This reply took {turn.totals.text()}."]
    rows = sorted(calls, key=lambda r: as_int(r.get("call_index")) or 0)
    for i, row in enumerate(rows, start=1):
        n = as_int(row.get("call_index")) or i
        total = as_float(row.get("total_ms"))
        head = f"Call {n}: " + (ms_text(total) if total is not None else "no time recorded")
        figures = stats_line(row)
        tools = [
            f"{_tool_name(s)[0]} ({p.figure})"
            for s, p in zip(steps, [q for q in turn.parts if q.kind == "tool"], strict=False)
            if (as_int(_field(s, "call_index")) or 0) == n
        ]
        line = " · ".join(x for x in (head, figures) if x)
        if tools:
            line += " → " + ", ".join(tools)
        lines.append(line)
    return "\n".join(lines)
