"""Tool calls on the wire: what the three JSON protocols share when they send tools and tool
turns, and read calls back.

Each protocol module keeps its own JSON (``openai_compat``, ``anthropic``, ``gemini``); this
module holds the pieces they share: grouping a conversation with tool turns into the turns an
API that alternates user and model wants, the arguments of an earlier call as the JSON object
Anthropic and Gemini want back, the finished words for a reply cut in the middle of a call,
and the stream rule every reader follows:

- calls are collected while the reply streams and yielded as ``ToolCall`` events only once the
  reply is complete, after all its text, just before its ``Usage`` and ``Finished``: a reply
  cut short never yields a call (it raises, and a call that was being written is named);
- a reply with calls ends ``Finished("tool_calls")`` whatever the server's own word for it
  (some OpenAI-compatible servers say "stop"); one that stopped at the token limit in the middle
  of a call raises ``BadResponse`` (half the arguments are not a call anyone should run);
- arguments are passed on as the model wrote them (malformed JSON included: the later loop
  returns it to the model as an error), ``"{}"`` when the model sent none.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from desktop.llm.errors import BadResponse
from desktop.llm.events import FinishReason, ToolCall
from desktop.llm.provider import ChatMessage

Group = tuple[str, list[ChatMessage]]


def system_and_groups(messages: Iterable[ChatMessage]) -> tuple[str, list[Group]]:
    """For APIs that take the system prompt apart and want user and model to alternate: the
    system messages' text, and the other messages grouped into turns ("user" or "assistant"),
    tool results counted as the user's (Anthropic and Gemini both send them in a user turn),
    consecutive messages of one side in one group."""
    messages = tuple(messages)
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    groups: list[Group] = []
    for m in messages:
        if m.role == "system":
            continue
        side = "assistant" if m.role == "assistant" else "user"
        if groups and groups[-1][0] == side:
            groups[-1][1].append(m)
        else:
            groups.append((side, [m]))
    return system, groups


def plain(group: list[ChatMessage]) -> bool:
    """Whether a group is text only (sent exactly as before tools and images existed)."""
    return all(m.role != "tool" and not m.tool_calls and not m.images for m in group)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """An earlier call's arguments as the JSON object Anthropic's ``input`` and Gemini's
    ``args`` must be. Arguments that were not a JSON object (the model wrote them malformed;
    the loop answered with an error) are kept, as text, under ``_malformed_arguments``, so the
    model sees what it sent."""
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    return {"_malformed_arguments": call.arguments}


MADE_UP_ID = "simi_call_"


def new_call_id() -> str:
    """An id for a call the provider sent none for (Gemini before ids, a local model);
    ``made_up`` tells it apart, so that it is never sent to a provider as its own."""
    return f"{MADE_UP_ID}{uuid.uuid4().hex[:20]}"


def made_up(call_id: str | None) -> bool:
    return not call_id or call_id.startswith(MADE_UP_ID)


def cut_mid_call(where: str, name: str) -> BadResponse:
    """The stream ended while the model was still writing a call."""
    return BadResponse(
        f"{where} ended the reply in the middle of a call to the tool “{name or 'unnamed'}”, "
        "so it was not run. The text so far is kept; press Retry to ask again."
    )


def length_mid_call(where: str, name: str) -> BadResponse:
    """The token limit cut a call's arguments short."""
    return BadResponse(
        f"{where} reached the reply's token limit while writing a call to the tool "
        f"“{name or 'unnamed'}”, so it was not run. Raise the agent's max tokens, then press "
        "Retry."
    )


def finish_with_calls(
    where: str, reason: FinishReason | None, calls: list[ToolCall]
) -> FinishReason | None:
    """The finish reason of a complete reply that wrote ``calls``: "tool_calls" when there
    are any, and a ``BadResponse`` when the token limit cut the last one."""
    if not calls:
        return "stop" if reason == "tool_calls" else reason
    if reason == "length":
        raise length_mid_call(where, calls[-1].name)
    return "tool_calls"
