"""Local tool calls: the grammar path with the real starter model (SmolLM2-135M, whose template
has no tool support), the template path with a copy of the starter whose chat template takes
tools (a short Hermes/Qwen-style template written into the GGUF), and the two reply readers
on the output shapes models write."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from desktop.chat.tool_loop import ANSWER_NOW
from desktop.llm.errors import BadResponse
from desktop.llm.events import Finished, RunInfo, TextDelta, ToolCall, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling, ToolSpec
from desktop.local import tool_calls
from desktop.local.client import WorkerClient
from desktop.local.engine import LocalEngine
from desktop.local.loading import LoadParams
from tests.helpers import gguf_files

ADD = ToolSpec(
    "add",
    "Add two numbers a and b.",
    {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)
CLOCK = ToolSpec("clock", "The time now.", {"type": "object", "properties": {}})
ASK = ChatRequest(
    "m",
    (
        ChatMessage("system", "You are a helpful assistant."),
        ChatMessage("user", "Use the add tool to add 2 and 3."),
    ),
    Sampling(max_tokens=48, temperature=0.0, seed=1),
    tools=(ADD, CLOCK),
)
# A short chat template in the Hermes/Qwen style: tools in the system turn, calls as
# <tool_call> blocks, results as <tool_response> in a user turn.
TOOLS_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'You are helpful.' }}
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
Call a tool with <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role != 'system' or not tools %}<|im_start|>{{ m.role }}
{{ m.content }}
{%- for c in m.tool_calls or [] %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    engine = LocalEngine()
    yield engine
    engine.unload()


@pytest.mark.slow
def test_starter_without_tool_template_makes_a_valid_call_under_the_grammar() -> None:
    """Through the worker process, as the app runs it."""
    client = WorkerClient()

    async def main() -> list:
        params = LoadParams(str(gguf_files.starter()), n_ctx=1024)
        return [event async for event in client.stream(params, ASK)]

    try:
        events = asyncio.run(main())
    finally:
        client.shutdown()
    [info] = [e for e in events if isinstance(e, RunInfo)]
    assert info.notice and "no tool support" in info.notice and "grammar" in info.notice
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert call.name in ("add", "clock") and call.id
    assert isinstance(json.loads(call.arguments), dict)  # well-formed, whatever the numbers
    assert events[-1] == Finished("tool_calls")


@pytest.mark.slow
def test_grammar_path_renders_tool_results_as_turns_the_model_can_read(engine) -> None:
    """After a call and its result the model answers or calls again: either way, valid."""
    called = ToolCall("simi_call_1", "add", '{"a": 2, "b": 3}')
    follow = ChatRequest(
        "m",
        (
            *ASK.messages,
            ChatMessage("assistant", "", tool_calls=(called,)),
            ChatMessage("tool", "5", tool_call_id="simi_call_1", name="add"),
        ),
        Sampling(max_tokens=48, temperature=0.0, seed=1),
        tools=(ADD, CLOCK),
    )
    events = list(
        engine.generate(
            LoadParams(str(gguf_files.starter()), n_ctx=1024), follow, threading.Event()
        )
    )
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.reason in ("stop", "tool_calls")
    if finished.reason == "tool_calls":
        [call] = [e for e in events if isinstance(e, ToolCall)]
        assert call.name in ("add", "clock")
    else:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()


@pytest.mark.slow
def test_token_limit_in_the_middle_of_a_grammar_call_is_an_error_not_a_call(engine) -> None:
    cut = ChatRequest(
        "m", ASK.messages, Sampling(max_tokens=6, temperature=0.0, seed=1), tools=ASK.tools
    )
    events: list = []
    with pytest.raises(BadResponse) as info:
        for event in engine.generate(
            LoadParams(str(gguf_files.starter()), n_ctx=1024), cut, threading.Event()
        ):
            events.append(event)
    assert "token limit" in info.value.user_message and "max tokens" in info.value.user_message
    assert not [e for e in events if isinstance(e, ToolCall | TextDelta)]


@pytest.mark.slow
def test_a_template_that_takes_tools_gets_them_and_no_grammar(tmp_path: Path) -> None:
    path = gguf_files.rewrite_starter(
        tmp_path / "tools.gguf", set_kv={"tokenizer.chat_template": TOOLS_TEMPLATE}
    )
    engine = LocalEngine()
    params = LoadParams(str(path), n_ctx=1024)
    try:
        model = engine.ensure_loaded(params)
        called = ToolCall("simi_call_1", "add", '{"a": 2, "b": 3}')
        messages = (
            *ASK.messages,
            ChatMessage("assistant", "", tool_calls=(called,)),
            ChatMessage("tool", "5", tool_call_id="simi_call_1", name="add"),
        )
        plan = tool_calls.plan_tools(
            ASK.tools, messages, template=model.template, model_name=model.name
        )
        assert plan is not None and plan.mode == "template" and plan.grammar() is None
        prompt, _stops, _bos, chatml = engine.render_prompt(model, messages, plan)
        assert not chatml
        assert '"name": "add"' in prompt and "Add two numbers a and b." in prompt
        assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}' in prompt
        assert "<tool_response>\n5\n</tool_response>" in prompt
        short = ChatRequest("m", ASK.messages, Sampling(max_tokens=4, seed=1), tools=ASK.tools)
        events = list(engine.generate(params, short, threading.Event()))
        [info] = [e for e in events if isinstance(e, RunInfo)]
        assert not info.notice  # the model's own template: nothing to warn about
        assert isinstance(events[-1], Finished)
    finally:
        engine.unload()


def _usage(events: list) -> Usage:
    [usage] = [e for e in events if isinstance(e, Usage)]
    return usage


def _answer_now_keeps_the_cache(engine: LocalEngine, params: LoadParams) -> list:
    """A call with tools, then the round limit's call: the same conversation plus the result
    and the "answer now" turn, ``tool_choice`` none. Returns the second call's events."""
    first = replace(ASK, sampling=Sampling(max_tokens=64, temperature=0.0, seed=1))
    before = _usage(list(engine.generate(params, first, threading.Event())))
    called = ToolCall("simi_call_1", "add", '{"a": 2, "b": 3}')
    last = replace(
        first,
        messages=(
            *first.messages,
            ChatMessage("assistant", "", tool_calls=(called,)),
            ChatMessage("tool", "5", tool_call_id="simi_call_1", name="add"),
            ChatMessage("user", ANSWER_NOW.format(rounds=8)),
        ),
        sampling=Sampling(max_tokens=24, temperature=0.0, seed=1),
        tool_choice="none",
    )
    events = list(engine.generate(params, last, threading.Event()))
    after = _usage(events)
    assert before.prompt_tokens and after.prompt_tokens and after.cached_tokens
    # the whole earlier prompt is reused (it used to be re-read: 18 of 928 tokens cached)
    assert after.cached_tokens >= before.prompt_tokens, (before, after)
    assert not [e for e in events if isinstance(e, ToolCall)]  # an answer, never a call
    assert events[-1] == Finished("stop") or events[-1] == Finished("length")
    return events


@pytest.mark.slow
def test_past_the_round_limit_the_grammar_path_keeps_the_prompt_cache(engine) -> None:
    params = LoadParams(str(gguf_files.starter()), n_ctx=1024)
    events = _answer_now_keeps_the_cache(engine, params)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()


@pytest.mark.slow
def test_past_the_round_limit_the_template_path_keeps_the_prompt_cache(tmp_path: Path) -> None:
    path = gguf_files.rewrite_starter(
        tmp_path / "tools.gguf", set_kv={"tokenizer.chat_template": TOOLS_TEMPLATE}
    )
    engine = LocalEngine()
    try:
        events = _answer_now_keeps_the_cache(engine, LoadParams(str(path), n_ctx=1024))
    finally:
        engine.unload()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "<tool_call>" not in text


def test_the_answer_only_grammar_under_a_template_refuses_a_call() -> None:
    from llama_cpp import LlamaGrammar

    LlamaGrammar.from_string(tool_calls.ANSWER_ONLY_TEXT, verbose=False)  # it parses
    plan = tool_calls.plan_tools(
        ASK.tools, ASK.messages, template=TOOLS_TEMPLATE, model_name="m", tool_choice="none"
    )
    auto = tool_calls.plan_tools(ASK.tools, ASK.messages, template=TOOLS_TEMPLATE, model_name="m")
    assert plan is not None and auto is not None
    assert plan.grammar_text == tool_calls.ANSWER_ONLY_TEXT
    assert (plan.messages, plan.tools) == (auto.messages, auto.tools)  # rendered as before
    grammar = tool_calls.plan_tools(ASK.tools, ASK.messages, template=None, model_name="m")
    answer = tool_calls.plan_tools(
        ASK.tools, ASK.messages, template=None, model_name="m", tool_choice="none"
    )
    assert grammar is not None and answer is not None
    assert answer.messages == grammar.messages  # the tools stay in the system prompt
    assert answer.grammar_text is not None and '"tool"' not in answer.grammar_text


def test_template_takes_tools_reads_the_template_not_its_words() -> None:
    assert tool_calls.template_takes_tools(TOOLS_TEMPLATE)
    assert not tool_calls.template_takes_tools("{{ messages }} tools are great")
    assert not tool_calls.template_takes_tools("{% broken")


def feed(reader, chunks: list[str]) -> list:
    events = [e for chunk in chunks for e in reader.feed(chunk)]
    return events + reader.close()


def shown(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_hermes_output_streams_its_text_then_the_calls() -> None:
    out = 'Sure.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>\n'
    out += '<tool_call>\n{"name": "clock", "arguments": {}}\n</tool_call>'
    reader = tool_calls.TemplateReply(("add", "clock"))
    events = feed(reader, [out[i : i + 3] for i in range(0, len(out), 3)])
    assert shown(events).strip() == "Sure."
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("add", {"a": 2, "b": 3}),
        ("clock", {}),
    ]
    assert len({c.id for c in calls}) == 2
    assert events.index(calls[0]) > max(i for i, e in enumerate(events) if isinstance(e, TextDelta))


def test_llama3_style_json_reply_is_a_call_and_other_json_is_text() -> None:
    reader = tool_calls.TemplateReply(("add",))
    events = feed(reader, ['{"name": "add", ', '"parameters": {"a": 1, "b": 2}}'])
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, json.loads(call.arguments)) == ("add", {"a": 1, "b": 2})
    assert not shown(events)
    reader = tool_calls.TemplateReply(("add",))
    assert shown(feed(reader, ['{"x": 1} is a JSON ', "object."])) == '{"x": 1} is a JSON object.'


def test_a_partial_tool_call_tag_is_held_then_shown_when_it_is_not_one() -> None:
    reader = tool_calls.TemplateReply(("add",))
    assert shown(reader.feed("a <tool_c")) == "a "
    assert shown(reader.feed("ar> is a tag")) == "<tool_car> is a tag"


def test_malformed_call_from_a_template_model_keeps_its_raw_text() -> None:
    reader = tool_calls.TemplateReply(("add",))
    [call] = [
        e
        for e in feed(reader, ['<tool_call>{"name": "add", "arguments": {"a": 2,'])
        if isinstance(e, ToolCall)
    ]
    assert call.name == "add" and call.arguments == '{"name": "add", "arguments": {"a": 2,'


def test_grammar_answer_streams_as_it_is_decoded_across_any_split() -> None:
    raw = json.dumps({"answer": 'Line 1\nsaid "hi" \\ café 😀 done'})
    for size in (1, 2, 5):
        reader = tool_calls.GrammarReply(("add",))
        events = feed(reader, [raw[i : i + size] for i in range(0, len(raw), size)])
        assert shown(events) == 'Line 1\nsaid "hi" \\ café 😀 done'
        assert not [e for e in events if isinstance(e, ToolCall)]


def test_grammar_call_becomes_a_tool_call_with_its_arguments() -> None:
    reader = tool_calls.GrammarReply(("add",))
    events = feed(reader, ['{"tool": "add", "argu', 'ments": {"a": 2, "b": 3}}'])
    [call] = events
    assert isinstance(call, ToolCall) and call.name == "add"
    assert json.loads(call.arguments) == {"a": 2, "b": 3}
    assert tool_calls.call_name('{"tool": "add", "argu') == "add"


def test_reply_grammar_names_every_tool_and_survives_a_schema_it_cannot_take() -> None:
    odd = ToolSpec("odd", "x", {"type": "object", "properties": {"r": {"$ref": "#/nowhere"}}})
    grammar = tool_calls.reply_grammar((ADD, odd))
    assert "add" in grammar
    assert "odd" in grammar and "answer" in grammar


def test_grammar_messages_put_the_tools_in_the_system_prompt_and_results_in_turns() -> None:
    called = ToolCall("simi_call_1", "add", '{"a": 2, "b": 3}')
    msgs = tool_calls.grammar_messages(
        (
            ChatMessage("user", "Add."),
            ChatMessage("assistant", "", tool_calls=(called,)),
            ChatMessage("tool", "boom", tool_call_id="simi_call_1", name="add", is_error=True),
        ),
        (ADD,),
    )
    assert msgs[0]["role"] == "system" and "- add: Add two numbers a and b." in msgs[0]["content"]
    assert json.loads(msgs[2]["content"]) == {"tool": "add", "arguments": {"a": 2, "b": 3}}
    assert msgs[3] == {"role": "user", "content": "The tool add failed: boom"}
