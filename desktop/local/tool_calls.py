"""Tool calls for local (llama.cpp) models: the model's own chat template, or a grammar.

When a request carries tools (``ChatRequest.tools``), ``plan_tools`` picks one of two paths:

- **template** — the model's chat template references ``tools`` (Qwen 2.5/3, Hermes, Llama 3.1+,
  Mistral...): the tools are passed to the template (llama-cpp-python's ``Jinja2ChatFormatter``
  takes ``tools=`` in OpenAI's ``{"type": "function", "function": {...}}`` shape), earlier calls
  and results go in as the template expects them (``tool_calls`` with arguments as an object,
  ``role: "tool"``), and the model's output is read back by ``TemplateReply``: Hermes/Qwen
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, or a reply that is one
  JSON call (or a list of them) as Llama 3 (``"parameters"``) and Mistral write it. The model
  writes freely; what is not a call is text.
- **grammar** — the template has no tool support (the SmolLM2 starter), or there is no
  template: a GBNF grammar (llama.cpp's JSON-schema converter) makes every reply one JSON
  object, either ``{"tool": "<one of the names>", "arguments": {...}}`` (the arguments held to
  that tool's schema) or ``{"answer": "..."}``; the tools and the format are described in the
  system prompt, earlier calls and results are rewritten as plain turns in the same JSON, and
  ``GrammarReply`` streams an answer's text as it is written and turns a call into a
  ``ToolCall``. The run's ``RunInfo.notice`` says so. Why a grammar and not free text with an
  optional call: a small model without tool training rarely starts a call by itself, and the
  grammar makes whatever it writes a well-formed call to a real tool or a plain answer; one call
  per reply keeps the grammar small.

Call ids are made up (``tool_wire.new_call_id``): local models have none.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from desktop.llm.events import StreamEvent, TextDelta, ToolCall
from desktop.llm.provider import ChatMessage, ToolSpec
from desktop.llm.tool_wire import arguments_object, new_call_id

GRAMMAR_NOTICE = (
    "{name}'s chat template has no tool support, so its tool calls are held to a grammar: "
    "each reply is one JSON object, a call to one tool or a plain answer."
)
TOOL_CALL_OPEN = "<tool_call>"
# Past the round limit under a template that takes tools: plain text that neither opens like a
# call (``{``, ``[``, whitespace first) nor writes ``<tool_call>`` (no "<t" anywhere).
ANSWER_ONLY_TEXT = 'root ::= [^<{[ \\t\\n] ( [^<] | "<" [^t] )*'


@functools.lru_cache(maxsize=16)
def template_takes_tools(template: str) -> bool:
    """Whether a Jinja chat template uses the ``tools`` variable (read from its syntax tree,
    so a template that only mentions the word in text does not count)."""
    import jinja2
    import jinja2.meta

    try:
        ast = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(template)
    except jinja2.TemplateError:
        return False
    return "tools" in jinja2.meta.find_undeclared_variables(ast)


@dataclass(frozen=True)
class ToolPlan:
    """How one request's tools reach the model and how its reply is read back."""

    mode: Literal["template", "grammar"]
    messages: list[dict[str, Any]]  # for the chat template
    tools: list[dict[str, Any]] | None  # for the template (template mode)
    grammar_text: str | None  # GBNF (grammar mode)
    names: tuple[str, ...]
    notice: str | None = None

    def grammar(self) -> Any:
        """The ``llama_cpp.LlamaGrammar`` for ``generate`` (None in template mode)."""
        if self.grammar_text is None:
            return None
        from llama_cpp import LlamaGrammar

        return LlamaGrammar.from_string(self.grammar_text, verbose=False)

    def reply(self) -> TemplateReply | GrammarReply:
        return TemplateReply(self.names) if self.mode == "template" else GrammarReply(self.names)


def plan_tools(
    tools: tuple[ToolSpec, ...],
    messages: tuple[ChatMessage, ...],
    *,
    template: str | None,
    model_name: str,
    tool_choice: str = "auto",
) -> ToolPlan | None:
    """The plan for a request (None without tools: the request renders as before).
    ``template``: the model's usable chat template (None when it has none, or it is broken).
    ``tool_choice`` "none" (past an agentic turn's round limit): the prompt is rendered exactly
    as the calls before it were (the same tools in the same place, so the prompt cache holds
    and only the new turns at the end are read), and the grammar allows an answer only."""
    if not tools:
        return None
    names = tuple(t.name for t in tools)
    if template is not None and template_takes_tools(template):
        plan = ToolPlan("template", template_messages(messages), openai_tools(tools), None, names)
    else:
        plan = grammar_plan(tools, messages, model_name)
    if tool_choice == "none":
        # an answer in the grammar's JSON ({"answer": ...}) or, under a template, plain text
        answer_only = reply_grammar(()) if plan.mode == "grammar" else ANSWER_ONLY_TEXT
        return replace(plan, grammar_text=answer_only, notice=None)
    return plan


def grammar_plan(
    tools: tuple[ToolSpec, ...], messages: tuple[ChatMessage, ...], model_name: str
) -> ToolPlan:
    names = tuple(t.name for t in tools)
    return ToolPlan(
        "grammar",
        grammar_messages(messages, tools),
        None,
        reply_grammar(tools),
        names,
        GRAMMAR_NOTICE.format(name=model_name),
    )


def as_grammar(
    plan: ToolPlan,
    tools: tuple[ToolSpec, ...],
    messages: tuple[ChatMessage, ...],
    model_name: str,
    tool_choice: str = "auto",
) -> ToolPlan:
    """The grammar plan instead (a template that takes tools but failed on this conversation)."""
    fallback = grammar_plan(tools, messages, model_name)
    if tool_choice == "none":
        fallback = replace(fallback, grammar_text=reply_grammar(()))
    return replace(fallback, notice=f"{fallback.notice} (Its template failed with tools.)")


# -- template mode -------------------------------------------------------------------------------
def openai_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def template_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """Messages as Hugging Face chat templates take them: calls with arguments as objects
    (templates ``tojson`` them), results as ``role: "tool"``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments_object(c)},
                }
                for c in m.tool_calls
            ]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id or ""
            item["name"] = m.name or ""
        out.append(item)
    return out


class TemplateReply:
    """Reads a template-mode reply as it streams: text is passed on, held back only while it
    may be the start of ``<tool_call>`` or, at the very start, a JSON call; calls come at the
    end (``close``)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.text = ""  # everything the model wrote
        self.shown = 0  # how much of it went out as text
        self.calls: list[ToolCall] = []
        self.writing_call = False

    def feed(self, chunk: str) -> list[StreamEvent]:
        self.text += chunk
        rest = self.text[self.shown :]
        if self.writing_call or (not self.text[: self.shown].strip() and rest.lstrip()[:1] in "{["):
            self.writing_call = self.writing_call or bool(rest.strip())
            return []  # a call (or a reply that opens like one): held to the end
        at = rest.find(TOOL_CALL_OPEN)
        if at >= 0:
            self.writing_call = True
            return self._show(rest[:at])
        keep = next(
            (k for k in range(len(TOOL_CALL_OPEN) - 1, 0, -1) if rest.endswith(TOOL_CALL_OPEN[:k])),
            0,
        )
        return self._show(rest[: len(rest) - keep])

    def _show(self, text: str) -> list[StreamEvent]:
        self.shown += len(text)
        return [TextDelta(text)] if text else []

    def close(self) -> list[StreamEvent]:
        """The rest of the reply: text not shown yet (a reply that only looked like a call),
        then its calls."""
        rest = self.text[self.shown :]
        calls, before, after = _template_calls(rest)
        events: list[StreamEvent] = []
        if not calls:
            events += self._show(rest)
        else:
            events += self._show(before + after) if (before + after).strip() else []
        self.calls = calls
        return events + list(calls)


_CALLED = re.compile(r'"(?:name|tool)"\s*:\s*"([^"]+)"')


def call_name(text: str) -> str:
    """The tool a reply cut short was calling, when it got as far as naming it."""
    found = _CALLED.search(text)
    return found.group(1) if found else ""


_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


def _template_calls(text: str) -> tuple[list[ToolCall], str, str]:
    """(calls, text before them, text after them) in what a template-mode reply held back."""
    if TOOL_CALL_OPEN in text:
        start = text.index(TOOL_CALL_OPEN)
        blocks = list(_BLOCK.finditer(text, start))
        calls = [_call_from_json(b.group(1).strip()) for b in blocks]
        after = text[blocks[-1].end() :] if blocks else ""
        return [c for c in calls if c is not None], text[:start], after
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return [], text, ""
    items = value if isinstance(value, list) else [value]
    calls = [_call_from_object(v) for v in items]
    if calls and all(c is not None for c in calls):
        return [c for c in calls if c is not None], "", ""
    return [], text, ""


def _call_from_json(text: str) -> ToolCall | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        name = _NAME.search(text)  # malformed: passed on raw, the loop answers with an error
        return ToolCall(new_call_id(), name.group(1) if name else "", text)
    return _call_from_object(value) or ToolCall(new_call_id(), "", text)


def _call_from_object(value: Any) -> ToolCall | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    args = value.get("arguments", value.get("parameters", {}))
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(new_call_id(), value["name"], text)


# -- grammar mode --------------------------------------------------------------------------------
def grammar_messages(
    messages: tuple[ChatMessage, ...], tools: tuple[ToolSpec, ...]
) -> list[dict[str, Any]]:
    """The conversation for a template without tools: the tools and the reply format added to
    the system prompt; earlier replies, calls and results as plain turns in the same JSON."""
    lines = ["You can call these tools:"]
    for t in tools:
        schema = json.dumps(t.parameters or {"type": "object", "properties": {}})
        lines.append(f"- {t.name}: {t.description} Arguments (JSON schema): {schema}")
    lines.append(
        'Reply with one JSON object only: {"tool": "<tool name>", "arguments": {...}} to call '
        'a tool, or {"answer": "<your reply>"} to answer. After a call you are given its '
        "result; then answer, or call another tool."
    )
    guide = "\n".join(lines)
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            out.append({"role": "system", "content": f"{m.content}\n\n{guide}"})
        elif m.role == "tool":
            what = "failed" if m.is_error else "returned"
            out.append({"role": "user", "content": f"The tool {m.name or ''} {what}: {m.content}"})
        elif m.role == "assistant" and m.tool_calls:
            calls = [{"tool": c.name, "arguments": arguments_object(c)} for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(json.dumps(c) for c in calls)})
        elif m.role == "assistant":
            out.append({"role": "assistant", "content": json.dumps({"answer": m.content})})
        else:
            out.append({"role": m.role, "content": m.content})
    if not any(m["role"] == "system" for m in out):
        out.insert(0, {"role": "system", "content": guide})
    return out


def reply_grammar(tools: tuple[ToolSpec, ...]) -> str:
    """GBNF for one JSON object: a call to one of ``tools`` or an answer. A tool whose schema
    the converter cannot take (an unsupported keyword, a ``$ref``: it would resolve against
    this grammar's root) gets any JSON object as its arguments."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    def converted(argument_schemas: list[dict[str, Any]]) -> str:
        options = [
            _object({"tool": {"const": t.name}, "arguments": schema})
            for t, schema in zip(tools, argument_schemas, strict=True)
        ]
        options.append(_object({"answer": {"type": "string"}}))
        order = ["tool", "arguments", "answer"]
        return json_schema_to_gbnf(json.dumps({"oneOf": options}), prop_order=order)

    schemas = []
    for t in tools:
        arguments = _closed(t.parameters or {"type": "object", "properties": {}})
        try:
            if "$ref" in json.dumps(arguments):
                raise ValueError("a $ref")
            json_schema_to_gbnf(json.dumps(arguments))
        except Exception:
            arguments = {"type": "object"}
        schemas.append(arguments)
    try:
        return converted(schemas)
    except Exception:  # what one schema took alone, together it did not: any objects
        return converted([{"type": "object"} for _ in tools])


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """An object schema that says nothing about other keys gets none (a small model would
    otherwise invent keys until the token limit)."""
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        return {**schema, "additionalProperties": False}
    return schema


class GrammarReply:
    """Reads a grammar-mode reply as it streams: an ``{"answer": "..."}`` reply's text is
    passed on as it is decoded; a call becomes a ``ToolCall`` at the end."""

    _ANSWER = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
    _ESCAPES = {
        "n": "\n",
        "t": "\t",
        "r": "\r",
        "b": "\b",
        "f": "\f",
        '"': '"',
        "\\": "\\",
        "/": "/",
    }

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.text = ""
        self.pos: int | None = None  # where the answer's undecoded text starts
        self.answer_done = False
        self.calls: list[ToolCall] = []

    @property
    def writing_call(self) -> bool:
        return self.pos is None and self.text.strip().startswith("{")

    def feed(self, chunk: str) -> list[StreamEvent]:
        self.text += chunk
        if self.pos is None:
            match = self._ANSWER.match(self.text)
            if match is None:
                return []
            self.pos = match.end()
        return self._decode()

    def _decode(self) -> list[StreamEvent]:
        out, text = [], self.text
        pos = self.pos or 0
        while pos < len(text) and not self.answer_done:
            c = text[pos]
            if c == '"':
                self.answer_done = True
                break
            if c != "\\":
                out.append(c)
                pos += 1
                continue
            if pos + 1 >= len(text):
                break
            e = text[pos + 1]
            if e != "u":
                out.append(self._ESCAPES.get(e, e))
                pos += 2
                continue
            code = text[pos + 2 : pos + 6]
            if len(code) < 4:
                break
            value = int(code, 16)
            if 0xD800 <= value < 0xDC00:  # a surrogate pair: wait for its second half
                low = text[pos + 6 : pos + 12]
                if len(low) < 6:
                    break
                value = 0x10000 + ((value - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00)
                pos += 6
            out.append(chr(value))
            pos += 6
        self.pos = pos
        return [TextDelta("".join(out))] if out else []

    def close(self) -> list[StreamEvent]:
        if self.pos is not None:
            return []  # an answer: its text went out as it came
        try:
            value = json.loads(self.text)
        except json.JSONDecodeError:
            return []  # cut short (stopped, or the token limit: the engine says which)
        if isinstance(value, dict) and isinstance(value.get("tool"), str):
            args = json.dumps(value.get("arguments", {}), ensure_ascii=False)
            self.calls = [ToolCall(new_call_id(), value["tool"], args)]
        return list(self.calls)
