"""Agents that use tools: which tools a turn offers, and running the calls a model asks for.

Contract (``ChatService.run`` drives it; the window, the CLI and the tests build on it):

- ``ToolRunner(manager, tools, steps)``: ``await runner.toolbox(agent)`` → ``ToolBox`` (the
  agent's allowed tools of every server it may use, servers started on first use; a server
  that cannot start is left out and named in ``box.notices``). ``box.specs`` go in the request.
- ``await runner.run_calls(agent, box, calls, ...)`` runs one model call's tool calls in order:
  each becomes a stored ``ToolStep`` (``store/tool_steps.py``); an unknown tool or arguments
  that are not a JSON object are returned to the model as errors without asking anyone; a
  call covered by an "always" grant runs at once; any other asks ``approve(ApprovalRequest)``
  → ``"once" | "always" | "deny" | "auto"`` (no approver: refused, and the model is told
  nobody could approve it). A denied call goes back to the model as denied. Tool errors,
  timeouts and servers that fail come back as errors (``is_error``) and the turn goes on;
  their text has every known secret (``settings.secrets.redact``) blanked out before it is
  stored or sent.
- ``on_event`` hears ``StepChanged(step)`` each time a step changes (asked, waiting, running,
  its result) and ``CallStarted(call_index)`` when the next model call of the turn begins.
- Cancelling (Stop) while a call waits for approval or runs marks it cancelled (stored) and
  propagates; ``ChatService.run`` then records the model call that asked for it as finished
  with ``"tool_calls"`` (and the steps stored), not as cancelled.
- ``MAX_TOOL_ROUNDS`` (8) rounds of tool calls per turn; then the model is asked to answer
  with ``tool_choice="none"`` and ``ANSWER_NOW``; calls it still asks for are refused.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from desktop.errors import UserError
from desktop.llm.events import ToolCall
from desktop.llm.provider import ChatMessage, ToolSpec
from desktop.settings.secrets import redact
from desktop.store.agents import Agent
from desktop.store.tool_steps import ToolStep, ToolStepStore
from desktop.store.tools import ALL_TOOLS, ToolStore
from desktop.tools.errors import ToolTimeout
from desktop.tools.manager import MAX_RESULT_CHARS, McpManager
from desktop.tools.results import ToolInfo, cut

MAX_TOOL_ROUNDS = 8
ANSWER_NOW = (
    "You have used the most tool calls allowed for one reply ({rounds} rounds). Do not call any "
    "more tools: answer now with what you have."
)
DENIED_TEXT = "The user denied this tool call. Do not call it again unless the user asks."
NO_APPROVER_TEXT = (
    "This tool call was not run: nobody could approve it (the app was not asked interactively)."
)
OVER_LIMIT_TEXT = "Not run: the tool-call limit for this reply was reached."
CANCELLED_TEXT = "The user stopped this tool call."

# "auto": allowed without asking (``simi ask --allow-tools``)
Decision = Literal["once", "always", "deny", "auto"]
# Model-facing names: OpenAI's rule (Anthropic and Gemini accept the same set).
_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class CallStarted:
    """The next model call of an agentic turn begins (``call_index`` 2, 3, …)."""

    call_index: int


@dataclass(frozen=True, slots=True)
class StepChanged:
    """A tool call of the turn was asked for, or changed (waiting, running, its result)."""

    step: ToolStep


TurnEvent = CallStarted | StepChanged


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the person is asked about: the step (tool, server, raw arguments), the agent, the
    tool's description and the arguments as indented JSON."""

    step: ToolStep
    agent_name: str
    description: str
    pretty_arguments: str


Approver = Callable[[ApprovalRequest], Awaitable[Decision]]


@dataclass
class ToolBox:
    """The tools one turn offers, by the name the model sees."""

    by_name: dict[str, ToolInfo] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(
            ToolSpec(name, info.description, info.input_schema or {"type": "object"})
            for name, info in self.by_name.items()
        )

    def __bool__(self) -> bool:
        return bool(self.by_name)


def model_names(tools: Sequence[ToolInfo]) -> dict[str, ToolInfo]:
    """A name per tool that the protocols accept and that no two tools share: the tool's own
    name, or ``server__tool`` where two servers have a tool of that name (characters outside
    ``[A-Za-z0-9_-]`` become ``_``)."""
    counts: dict[str, int] = {}
    for info in tools:
        counts[info.name] = counts.get(info.name, 0) + 1
    out: dict[str, ToolInfo] = {}
    for info in tools:
        name = info.name if counts[info.name] == 1 else f"{info.server}__{info.name}"
        name = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool"
        base, n = name, 2
        while name in out:
            name = f"{base[:60]}_{n}"
            n += 1
        out[name] = info
    return out


def result_limit(agent: Agent) -> int:
    """The most characters of a tool result sent to the model: the manager's limit, and for
    a local model about a quarter of its context (a character per token; ~4 is typical), so
    one big result does not make the next call fail with "context too long"."""
    if agent.is_local and agent.n_ctx:
        return max(1_000, min(MAX_RESULT_CHARS, int(agent.n_ctx)))
    return MAX_RESULT_CHARS


def pretty_json(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw or "{}"), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return raw


def parse_arguments(raw: str) -> dict[str, Any]:
    """The model's arguments as an object; ``ValueError`` with words for the model if not."""
    text = raw.strip() or "{}"
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"The arguments are not valid JSON ({exc}). Send a JSON object.") from None
    if not isinstance(value, dict):
        raise ValueError("The arguments must be a JSON object, not " + type(value).__name__ + ".")
    return value


def tool_messages(steps: Sequence[ToolStep], text: str) -> list[ChatMessage]:
    """One model call's tool calls and their results as the next request carries them: the
    assistant's ``text`` with the calls, then one "tool" message per call."""
    calls = tuple(
        ToolCall(s.call_id, s.model_name or s.tool, s.arguments or "{}", s.signature) for s in steps
    )
    out = [ChatMessage("assistant", text, tool_calls=calls)]
    for s in steps:
        result = s.result if s.final else "The call was interrupted before it finished."
        out.append(
            ChatMessage(
                "tool",
                result,
                tool_call_id=s.call_id,
                name=s.model_name or s.tool,
                is_error=s.is_error or not s.final,
            )
        )
    return out


def history_of(content: str, steps: Sequence[ToolStep]) -> list[ChatMessage]:
    """A stored reply that used tools, as a later request carries it: each model call's text
    with its calls and results, then the final text."""
    out: list[ChatMessage] = []
    start = 0
    by_call: dict[int, list[ToolStep]] = {}
    for s in steps:
        by_call.setdefault(s.call_index, []).append(s)
    for index in sorted(by_call):
        group = by_call[index]
        offset = max(start, min(len(content), group[0].text_offset))
        out.extend(tool_messages(group, content[start:offset].strip()))
        start = offset
    rest = content[start:].strip()
    if rest:
        out.append(ChatMessage("assistant", rest))
    return out


class ToolRunner:
    """The MCP servers (``McpManager``), what each agent may use (``ToolStore``) and the tool
    steps of every reply (``ToolStepStore``)."""

    def __init__(self, manager: McpManager, tools: ToolStore, steps: ToolStepStore) -> None:
        self.manager = manager
        self.tools = tools
        self.steps = steps

    def agent_uses_tools(self, agent: Agent) -> bool:
        return agent.id is not None and bool(self.tools.agent_tools(agent.id))

    async def toolbox(self, agent: Agent) -> ToolBox:
        box = ToolBox()
        if agent.id is None:
            return box
        allowed: dict[str, set[str]] = {}
        for server, tool in self.tools.agent_tools(agent.id):
            allowed.setdefault(server, set()).add(tool)
        found: list[ToolInfo] = []
        for server, names in allowed.items():
            try:
                infos = await self.manager.tools(server)
            except UserError as exc:
                box.notices.append(f"tools of “{server}” unavailable: {exc.user_message}")
                continue
            found.extend(i for i in infos if ALL_TOOLS in names or i.name in names)
        box.by_name = model_names(found)
        return box

    async def run_calls(
        self,
        agent: Agent,
        box: ToolBox,
        calls: Sequence[ToolCall],
        *,
        message_id: int,
        call_index: int,
        first_position: int,
        text_offset: int,
        approve: Approver | None,
        emit: Callable[[TurnEvent], None],
        over_limit: bool = False,
    ) -> list[ToolStep]:
        steps: list[ToolStep] = []
        for i, call in enumerate(calls):
            info = box.by_name.get(call.name)
            step = self.steps.save(
                ToolStep(
                    message_id=message_id,
                    call_index=call_index,
                    position=first_position + i,
                    call_id=call.id,
                    server=info.server if info else "",
                    tool=info.name if info else call.name,
                    arguments=call.arguments,
                    text_offset=text_offset,
                    signature=call.signature,
                    model_name=call.name,
                )
            )
            emit(StepChanged(step))
            step = await self._run_one(agent, box, info, step, approve, emit, over_limit)
            steps.append(step)
        return steps

    def _set(self, step: ToolStep, emit: Callable[[TurnEvent], None], **changes: Any) -> ToolStep:
        step = self.steps.save(step.with_changes(**changes))
        emit(StepChanged(step))
        return step

    async def _run_one(
        self,
        agent: Agent,
        box: ToolBox,
        info: ToolInfo | None,
        step: ToolStep,
        approve: Approver | None,
        emit: Callable[[TurnEvent], None],
        over_limit: bool,
    ) -> ToolStep:
        def ended(status: str, text: str, *, is_error: bool = True, **more: Any) -> ToolStep:
            if is_error:  # an error may quote a key (a server's env, its stderr): never kept
                text = redact(text)
            more.setdefault("size", len(text))
            return self._set(step, emit, status=status, result=text, is_error=is_error, **more)

        if over_limit:
            return ended("refused", OVER_LIMIT_TEXT)
        if info is None:
            names = ", ".join(sorted(box.by_name)) or "none"
            return ended("invalid", f"There is no tool named “{step.tool}”. Tools: {names}.")
        try:
            arguments = parse_arguments(step.arguments)
        except ValueError as exc:
            return ended("invalid", str(exc))
        try:
            approval = await self._approval(agent, info, step, approve, emit)
            if approval == "denied":
                return ended("denied", DENIED_TEXT, approval="denied")
            if approval == "":
                return ended("refused", NO_APPROVER_TEXT)
            step = self._set(step, emit, status="running", approval=approval)
            result = await self.manager.call(info.server, info.name, arguments)
        except asyncio.CancelledError:
            self._set(step, emit, status="cancelled", result=CANCELLED_TEXT, is_error=True)
            raise
        except ToolTimeout as exc:
            return ended("timeout", exc.user_message)
        except UserError as exc:
            return ended("error", exc.user_message or "The tool's server failed.")
        text, shortened = result.text, False
        limit = result_limit(agent)
        if min(len(text), result.size) > limit:  # tighter than the manager's own cut
            text, shortened = cut(text, limit, whole=result.size)
        return ended(
            "done",
            text,
            is_error=result.is_error,
            size=result.size,
            duration_ms=result.duration_ms,
            truncated=result.truncated or shortened,
        )

    async def _approval(
        self,
        agent: Agent,
        info: ToolInfo,
        step: ToolStep,
        approve: Approver | None,
        emit: Callable[[TurnEvent], None],
    ) -> str:
        """ "granted" / "once" / "always" / "denied", or "" when nobody could be asked."""
        assert agent.id is not None
        if self.tools.has_grant(agent.id, info.server, info.name):
            return "granted"
        if approve is None:
            return ""
        self._set(step, emit, status="waiting")
        decision = await approve(
            ApprovalRequest(step, agent.name, info.description, pretty_json(step.arguments))
        )
        if decision == "always":
            self.tools.add_grant(agent.id, info.server, info.name)
            return "always"
        return decision if decision in ("once", "auto") else "denied"
