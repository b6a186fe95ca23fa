"""``serve/wire.py``: how an agent is named as a model, and what request its provider gets from
a client's body (the agent's system prompt and sampling win unless the agent lets clients
choose)."""

from __future__ import annotations

import pytest

from desktop.llm.provider import ChatMessage
from desktop.serve.wire import ApiError, agent_request, model_ids, parse_ask, slug
from desktop.store.agents import Agent


def _agent(name: str = "Coder", agent_id: int = 1, **fields) -> Agent:
    return Agent(name=name, kind="openai-compatible", model="m", id=agent_id, **fields)


@pytest.mark.parametrize(
    ("name", "model_id"),
    [
        ("Coder (fast)", "coder-fast"),
        ("SmolLM2 (local)", "smollm2-local"),
        ("  Ünïcödé  Agent ", "unicode-agent"),
        ("GPT-4.1 mini", "gpt-4.1-mini"),
        ("日本語", "agent"),
    ],
)
def test_an_agents_model_id_is_its_name_in_lower_case_ascii_words(name, model_id) -> None:
    assert slug(name) == model_id


def test_names_that_give_the_same_id_each_get_their_agent_id_appended() -> None:
    agents = [_agent("Coder (fast)", 7), _agent("coder fast", 3), _agent("Writer", 5)]
    ids = model_ids(agents)
    assert set(ids) == {"coder-fast-3", "coder-fast-7", "writer"}
    assert ids["coder-fast-7"].name == "Coder (fast)" and ids["coder-fast-3"].name == "coder fast"
    # the ids do not depend on the order the agents come in
    assert model_ids(list(reversed(agents))).keys() == ids.keys()


def test_every_agent_keeps_a_model_id_of_its_own() -> None:
    agents = [_agent("Coder fast", 1), _agent("Coder (fast)", 2), _agent("Coder fast 1", 3)]
    ids = model_ids(agents)
    assert sorted(a.id for a in ids.values()) == [1, 2, 3]


def _ask(messages, **extra):
    return parse_ask({"model": "coder", "messages": messages, **extra})


def test_the_agents_system_prompt_comes_first_and_a_clients_system_message_joins_it() -> None:
    agent = _agent(system_prompt="You are SIMI's coder.")
    ask = _ask(
        [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "later note"},
        ]
    )
    request = agent_request(agent, ask, client_sampling=False)
    assert request.messages == (
        ChatMessage("system", "You are SIMI's coder.\n\nAnswer in French."),
        ChatMessage("user", "hi"),
        ChatMessage("system", "later note"),  # one after the conversation started stays put
    )


def test_without_an_agent_prompt_the_clients_system_message_is_the_only_one() -> None:
    ask = _ask([{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "x"}])
    request = agent_request(_agent(), ask, client_sampling=False)
    assert request.messages == (ChatMessage("system", "Be brief."), ChatMessage("user", "x"))


def test_a_clients_sampling_is_ignored_unless_the_agent_lets_clients_choose() -> None:
    agent = _agent(temperature=0.2, top_p=0.9, max_tokens=32, seed=5, stop=("END",))
    ask = _ask(
        [{"role": "user", "content": "x"}],
        temperature=1.5,
        top_p=0.5,
        max_tokens=7,
        seed=99,
        stop="STOP",
    )
    fixed = agent_request(agent, ask, client_sampling=False).sampling
    assert (fixed.temperature, fixed.top_p, fixed.max_tokens, fixed.seed) == (0.2, 0.9, 32, 5)
    assert fixed.stop == ("END", "STOP")  # a client's stop words always apply
    chosen = agent_request(agent, ask, client_sampling=True).sampling
    assert (chosen.temperature, chosen.top_p, chosen.max_tokens, chosen.seed) == (1.5, 0.5, 7, 99)
    # max_completion_tokens (the newer name) wins over max_tokens
    newer = _ask([{"role": "user", "content": "x"}], max_tokens=7, max_completion_tokens=9)
    assert agent_request(agent, newer, client_sampling=True).sampling.max_tokens == 9


def test_tools_and_tool_history_are_read_from_the_body() -> None:
    ask = _ask(
        [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "cold"},
        ],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather now",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    )
    request = agent_request(_agent(), ask, client_sampling=False)
    assert [t.name for t in request.tools] == ["get_weather"]
    assert request.tools[0].parameters["properties"]["city"] == {"type": "string"}
    call = request.messages[1].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", '{"city":"Oslo"}')
    assert request.messages[2] == ChatMessage("tool", "cold", tool_call_id="call_1")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "coder"}, "messages"),
        ({"model": "coder", "messages": []}, "messages"),
        ({"model": "coder", "messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        ({"model": "coder", "messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
        (
            {
                "model": "coder",
                "messages": [{"role": "user", "content": [{"type": "input_audio"}]}],
            },
            "messages[0].content",
        ),
        ({"model": "coder", "messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        (
            {"model": "coder", "messages": [{"role": "user", "content": "x"}], "temperature": 3},
            "temperature",
        ),
        (
            {"model": "coder", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
        ),
        (
            {
                "model": "coder",
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": "required",
            },
            "tool_choice",
        ),
    ],
)
def test_a_body_that_cannot_be_served_is_a_400_naming_the_field(body, param) -> None:
    with pytest.raises(ApiError) as info:
        parse_ask(body)
    assert info.value.status == 400 and info.value.param == param
    assert info.value.body()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("tool", ["x", None, 3, {"type": "retrieval"}, {"function": "f"}])
def test_a_tool_that_is_not_a_function_object_is_a_400(tool) -> None:
    with pytest.raises(ApiError) as info:
        parse_ask(
            {"model": "coder", "messages": [{"role": "user", "content": "x"}], "tools": [tool]}
        )
    assert info.value.status == 400 and info.value.param == "tools[0]"


def test_a_text_chunk_rendered_once_per_reply_is_the_chunk_itself() -> None:
    """Per token only the text is encoded; the frame around it must be the whole chunk's."""
    from desktop.serve.wire import Completion, sse

    completion = Completion("coder", "1a")
    for text in ("hi", 'quote " and \\ and\nnewline', "é 漢字 \x00 \u2028", ""):
        assert completion.text_frame(text) == sse(completion.chunk({"content": text}))
