"""Dropping the oldest turns to fit n_ctx, counted with the model's own tokenizer."""

from __future__ import annotations

import pytest

from desktop.llm.errors import ContextTooLong
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.context import PromptCounter, plan_fit, without_oldest_turns
from desktop.local.engine import LocalEngine
from desktop.local.loading import LoadParams
from tests.helpers import gguf_files


def _conversation(turns: int) -> list[ChatMessage]:
    msgs = [ChatMessage("system", "You are terse.")]
    for i in range(turns):
        msgs.append(ChatMessage("user", f"Question {i}: " + "tell me about rivers " * 10))
        msgs.append(ChatMessage("assistant", f"Answer {i}: " + "rivers flow to the sea " * 10))
    msgs.append(ChatMessage("user", "And lakes?"))
    return msgs


@pytest.fixture(scope="module")
def counter():
    c = PromptCounter(str(gguf_files.starter()))
    yield c
    c.close()


def test_plan_drops_just_enough_oldest_turns(counter) -> None:
    messages = _conversation(8)
    n_ctx = 512
    plan = plan_fit(messages, n_ctx, counter, reply_reserve=64)
    assert plan.fits and plan.drop_turns > 0 and plan.tokens_before > n_ctx - 64
    kept = without_oldest_turns(messages, plan.drop_turns)
    assert counter(kept) == plan.tokens_after <= n_ctx - 64
    assert counter(without_oldest_turns(messages, plan.drop_turns - 1)) > n_ctx - 64  # minimal
    assert kept[0].role == "system" and kept[-1].content == "And lakes?"
    assert plan.messages_dropped == 2 * plan.drop_turns


def test_counter_agrees_with_the_engine_that_refuses_the_prompt(counter) -> None:
    messages = tuple(_conversation(8))
    engine = LocalEngine()
    params = LoadParams(str(gguf_files.starter()), n_ctx=512)
    request = ChatRequest("m", messages, Sampling(max_tokens=4))
    try:
        with pytest.raises(ContextTooLong) as info:
            list(engine.generate(params, request, _Never()))
    finally:
        engine.unload()
    assert info.value.needed_tokens == counter(list(messages)) and info.value.n_ctx == 512


def test_a_newest_turn_too_long_alone_does_not_fit(counter) -> None:
    messages = [ChatMessage("user", "word " * 800)]
    plan = plan_fit(messages, 256, counter)
    assert not plan.fits and plan.drop_turns == 0


class _Never:
    def is_set(self) -> bool:
        return False
