"""The agentic loop's pure parts: names the model sees, arguments it sent, results cut to
what a local model's context holds, and a stored reply replayed as a later request's history."""

from __future__ import annotations

import pytest

from desktop.chat.tool_loop import history_of, model_names, parse_arguments, result_limit
from desktop.store.agents import Agent
from desktop.store.tool_steps import ToolStep
from desktop.tools.results import ToolInfo


def test_tools_of_two_servers_with_one_name_get_names_that_tell_them_apart() -> None:
    names = model_names(
        [ToolInfo("files", "search"), ToolInfo("web", "search"), ToolInfo("web", "fetch.url")]
    )
    assert {n: (i.server, i.name) for n, i in names.items()} == {
        "files__search": ("files", "search"),
        "web__search": ("web", "search"),
        "fetch_url": ("web", "fetch.url"),  # a dot is not allowed in a function name
    }


@pytest.mark.parametrize(
    ("raw", "words"),
    [("{", "not valid JSON"), ("[1, 2]", "must be a JSON object, not list"), ('"x"', "not str")],
)
def test_arguments_that_are_not_an_object_are_refused_with_words_for_the_model(
    raw: str, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        parse_arguments(raw)
    assert parse_arguments("") == {} and parse_arguments(' {"a": 1} ') == {"a": 1}


def test_a_local_models_results_are_cut_to_a_share_of_its_context() -> None:
    local = Agent(name="L", kind="local", model="m.gguf", n_ctx=4096)
    remote = Agent(name="R", kind="openai", model="gpt")
    assert result_limit(local) == 4096
    assert result_limit(local.with_changes(n_ctx=256)) == 1000
    assert result_limit(remote) == 100_000


def test_a_stored_reply_with_two_rounds_of_calls_replays_as_calls_results_and_text() -> None:
    content = "Looking.\n\nStill looking.\n\nFound it."

    def step(call_index: int, position: int, offset: int, **more: object) -> ToolStep:
        fields = dict(
            message_id=1,
            call_index=call_index,
            position=position,
            call_id=f"c{position}",
            server="s",
            tool="find",
            arguments="{}",
            text_offset=offset,
            status="done",
            result=f"r{position}",
        )
        fields.update(more)
        return ToolStep(**fields)  # type: ignore[arg-type]

    steps = [
        step(1, 0, len("Looking.")),
        step(2, 1, len("Looking.\n\nStill looking."), status="denied", is_error=True),
        step(2, 2, len("Looking.\n\nStill looking."), status="running"),  # a crash cut it off
    ]
    out = history_of(content, steps)
    assert [(m.role, m.content) for m in out] == [
        ("assistant", "Looking."),
        ("tool", "r0"),
        ("assistant", "Still looking."),
        ("tool", "r1"),
        ("tool", "The call was interrupted before it finished."),
        ("assistant", "Found it."),
    ]
    assert [c.id for c in out[2].tool_calls] == ["c1", "c2"]
    assert [m.is_error for m in out if m.role == "tool"] == [False, True, True]


def test_a_cloned_agent_may_use_the_same_tools_but_not_the_originals_grants(services) -> None:
    from tests.helpers.tool_turns import add_mcp_server, tool_agent

    add_mcp_server(services)
    agent = tool_agent(services, "http://127.0.0.1:9/v1", tools="tools:add,tools:echo")
    services.tools.tools.add_grant(agent.id, "tools", "add")
    copy = services.agents.clone(agent)
    assert services.tools.tools.agent_tools(copy.id) == [("tools", "add"), ("tools", "echo")]
    assert services.tools.tools.grants(copy.id) == []
