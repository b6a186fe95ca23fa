"""Tool calls on the wire, for each protocol, against a loopback server streaming scripted calls.

The server (``tests.helpers.fault_server`` with ``tests.helpers.tool_server`` bodies) stands
in for api.openai.com and every OpenAI-compatible server, api.anthropic.com and
generativelanguage.googleapis.com answering a request that carried tools: it streams each
API's own event shapes, records the requests, and can end the stream mid-call.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from desktop.errors import UserError
from desktop.llm.errors import BadResponse
from desktop.llm.events import Finished, TextDelta, ToolCall, Usage
from desktop.llm.gemini import gemini_schema
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling, ToolSpec
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.tool_server import Call, tool_reply
from tests.llm.streams import KINDS, make, run, text

ADD = ToolSpec(
    "add",
    "Add two numbers.",
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
)
CLOCK = ToolSpec("clock", "The time now.", {"type": "object", "properties": {}})
REQUEST = ChatRequest(
    model="test-model",
    messages=(ChatMessage("system", "Use tools."), ChatMessage("user", "Add 2 and 3.")),
    sampling=Sampling(max_tokens=64),
    tools=(ADD, CLOCK),
)
ARGS = '{"a": 2, "b": 3}'


def stream(kind: str, reply: Reply, request: ChatRequest = REQUEST) -> tuple[list, object, object]:
    with FaultServer(reply) as server:
        events, error = asyncio.run(run(make(kind, server.url), request))
    return events, error, server.requests[0].json()


def calls(events: list) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


@pytest.mark.parametrize("kind", KINDS)
def test_one_call_arrives_whole_and_the_reply_ends_tool_calls(kind: str) -> None:
    events, error, _ = stream(kind, tool_reply(kind, [Call("call_1", "add", ARGS)]))
    assert error is None
    (call,) = calls(events)
    assert (call.id, call.name, json.loads(call.arguments)) == ("call_1", "add", {"a": 2, "b": 3})
    assert events[-1] == Finished("tool_calls")
    # the call comes once the reply is whole: after its text, before its usage
    assert events.index(call) < events.index(next(e for e in events if isinstance(e, Usage)))


@pytest.mark.parametrize("kind", KINDS)
def test_two_calls_in_one_turn_keep_their_order_and_ids(kind: str) -> None:
    two = [Call("call_a", "add", ARGS), Call("call_b", "clock", "{}")]
    events, error, _ = stream(kind, tool_reply(kind, two, pieces=3))
    assert error is None
    assert [(c.id, c.name) for c in calls(events)] == [("call_a", "add"), ("call_b", "clock")]
    assert json.loads(calls(events)[1].arguments) == {}
    assert events[-1] == Finished("tool_calls")


@pytest.mark.parametrize("kind", KINDS)
def test_text_then_a_call_yields_the_text_first(kind: str) -> None:
    reply = tool_reply(kind, [Call("call_1", "add", ARGS)], text="Let me add those. ")
    events, error, _ = stream(kind, reply)
    assert error is None and text(events) == "Let me add those. "
    last_text = max(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert events.index(calls(events)[0]) > last_text
    assert events[-1] == Finished("tool_calls")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_arguments_in_many_fragments_are_joined_exactly(kind: str) -> None:
    args = json.dumps({"a": 123456789, "b": 0.5, "note": "a “quoted” word, and more"})
    events, error, _ = stream(kind, tool_reply(kind, [Call("call_1", "add", args)], pieces=17))
    assert error is None and calls(events)[0].arguments == args


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_malformed_arguments_still_arrive_as_a_call_with_the_raw_text(kind: str) -> None:
    """The later loop answers the model with an error; here the text must reach it as is."""
    broken = '{"a": 2, "b": three'
    events, error, _ = stream(kind, tool_reply(kind, [Call("call_1", "add", broken)], pieces=4))
    assert error is None and calls(events)[0].arguments == broken
    assert events[-1] == Finished("tool_calls")


def test_gemini_malformed_function_call_is_a_bad_response_in_words() -> None:
    events, error, _ = stream("gemini", tool_reply("gemini", [], finish="MALFORMED_FUNCTION_CALL"))
    assert isinstance(error, BadResponse) and "could not write a call" in error.user_message
    assert not calls(events)


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_that_ends_mid_call_is_a_bad_response_naming_the_tool(kind: str) -> None:
    reply = tool_reply(kind, [Call("call_1", "add", ARGS)], text="Adding. ", pieces=6, cut="end")
    events, error, _ = stream(kind, reply)
    assert isinstance(error, BadResponse)
    assert "“add”" in error.user_message and "not run" in error.user_message
    assert text(events) == "Adding. " and not calls(events)


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_dropped_mid_call_runs_no_call(kind: str) -> None:
    reply = tool_reply(kind, [Call("call_1", "add", ARGS)], pieces=6, cut="drop")
    events, error, _ = stream(kind, reply)
    assert isinstance(error, UserError) and error.user_message
    assert not calls(events)


@pytest.mark.parametrize(
    ("kind", "word"), [("openai", "length"), ("anthropic", "max_tokens"), ("gemini", "MAX_TOKENS")]
)
def test_the_token_limit_in_the_middle_of_a_call_says_raise_max_tokens(
    kind: str, word: str
) -> None:
    reply = tool_reply(kind, [Call("call_1", "add", '{"a": 2, "b"')], finish=word)
    if kind == "gemini":  # Gemini sends whole calls: a complete one then the limit
        reply = tool_reply(kind, [Call("call_1", "add", ARGS)], finish=word)
    events, error, _ = stream(kind, reply)
    assert isinstance(error, BadResponse) and "max tokens" in error.user_message
    assert not calls(events)


def test_openai_compatible_server_saying_stop_with_calls_still_ends_tool_calls() -> None:
    events, error, _ = stream(
        "openai", tool_reply("openai", [Call("c", "add", ARGS)], finish="stop")
    )
    assert error is None and events[-1] == Finished("tool_calls")


def test_openai_calls_at_one_index_with_new_ids_are_separate_calls() -> None:
    """Ollama streams every call of a parallel batch at index 0, told apart by its id."""
    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": f"call_{n}",
                                "type": "function",
                                "function": {"name": name, "arguments": args},
                            }
                        ]
                    },
                }
            ]
        }
        for n, (name, args) in enumerate([("add", ARGS), ("clock", "{}")])
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
    events, error, _ = stream("openai", Reply(body=body))
    assert error is None
    assert [(c.id, c.name, c.arguments) for c in calls(events)] == [
        ("call_0", "add", ARGS),
        ("call_1", "clock", "{}"),
    ]


def test_gemini_call_without_an_id_gets_one_and_its_signature_is_kept() -> None:
    reply = tool_reply("gemini", [Call("", "add", ARGS)], signature="c2lnbmF0dXJl")
    events, error, _ = stream("gemini", reply)
    assert error is None
    (call,) = calls(events)
    assert call.id and call.signature == "c2lnbmF0dXJl"
    assert events[-1] == Finished("tool_calls")


# -- what the requests carry ---------------------------------------------------------------------
CALLED = ToolCall("call_7", "add", ARGS)
FOLLOW_UP = ChatRequest(
    model="test-model",
    messages=(
        ChatMessage("system", "Use tools."),
        ChatMessage("user", "Add 2 and 3, and tell the time."),
        ChatMessage(
            "assistant",
            "Adding.",
            tool_calls=(CALLED, ToolCall("call_8", "clock", "{}", signature="c2ln")),
        ),
        ChatMessage("tool", "5", tool_call_id="call_7", name="add"),
        ChatMessage("tool", "clock is broken", tool_call_id="call_8", name="clock", is_error=True),
        ChatMessage("user", "Thanks."),
    ),
    tools=(ADD, CLOCK),
)


def test_openai_request_carries_tools_calls_and_results_in_its_shape() -> None:
    _, _, body = stream("openai", tool_reply("openai", []), FOLLOW_UP)
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": ADD.parameters,
        },
    }
    assert body["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "add", "arguments": ARGS},
                },
                {
                    "id": "call_8",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "5"},
        {"role": "tool", "tool_call_id": "call_8", "content": "clock is broken"},
        {"role": "user", "content": "Thanks."},
    ]


def test_anthropic_request_carries_tools_tool_use_and_tool_result_blocks() -> None:
    _, _, body = stream("anthropic", tool_reply("anthropic", []), FOLLOW_UP)
    assert body["tools"][1] == {
        "name": "clock",
        "description": "The time now.",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert body["messages"] == [
        {"role": "user", "content": "Add 2 and 3, and tell the time."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "call_7", "name": "add", "input": {"a": 2, "b": 3}},
                {"type": "tool_use", "id": "call_8", "name": "clock", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_7", "content": "5"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_8",
                    "content": "clock is broken",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks."},
            ],
        },
    ]


def test_gemini_request_carries_declarations_calls_with_signature_and_responses() -> None:
    _, _, body = stream("gemini", tool_reply("gemini", []), FOLLOW_UP)
    add, clock = body["tools"][0]["functionDeclarations"]
    assert add == {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    }
    assert clock == {"name": "clock", "description": "The time now."}  # no empty object
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"text": "Adding."},
                {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}, "id": "call_7"}},
                {
                    "functionCall": {"name": "clock", "args": {}, "id": "call_8"},
                    "thoughtSignature": "c2ln",
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "add", "response": {"result": "5"}, "id": "call_7"}},
                {
                    "functionResponse": {
                        "name": "clock",
                        "response": {"error": "clock is broken"},
                        "id": "call_8",
                    }
                },
                {"text": "Thanks."},
            ],
        },
    ]


def test_gemini_schema_drops_what_gemini_refuses_all_the_way_down() -> None:
    schema = {
        "$schema": "x",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "mode": {"const": "fast", "description": "d"},
            "tags": {"type": "array", "items": {"type": "string", "$ref": "#/x", "examples": []}},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "nested": {
                "type": "object",
                "properties": {"x": {"type": "integer", "exclusiveMinimum": 0}},
            },
        },
        "required": ["mode", "ghost"],
    }
    assert gemini_schema(schema) == {
        "type": "object",
        "properties": {
            "mode": {"description": "d", "enum": ["fast"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "when": {"type": "string", "nullable": True, "format": "date-time"},
            "nested": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
        "required": ["mode"],
    }


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_without_tools_sends_no_tool_fields(kind: str) -> None:
    plain = ChatRequest(model="m", messages=(ChatMessage("user", "Hi"),))
    _, _, body = stream(kind, tool_reply(kind, [], text="Hello"), plain)
    assert "tools" not in body
    assert "tool" not in json.dumps(body)


def test_malformed_arguments_sent_back_stay_visible_to_the_model() -> None:
    """Anthropic and Gemini want an object: the model's broken text goes back inside one."""
    broken = ChatRequest(
        model="m",
        messages=(
            ChatMessage("user", "Add."),
            ChatMessage("assistant", "", tool_calls=(ToolCall("call_1", "add", '{"a": 2,'),)),
            ChatMessage("tool", "arguments are not JSON", tool_call_id="call_1", is_error=True),
        ),
        tools=(ADD,),
    )
    _, _, body = stream("anthropic", tool_reply("anthropic", []), broken)
    block = body["messages"][1]["content"][0]
    assert block["input"] == {"_malformed_arguments": '{"a": 2,'}
