""" "Raise context" offers sizes with their memory and never past the trained context unless
that is the person's explicit choice. The model is the real starter file (trained on 8,192)."""

from __future__ import annotations

from typing import Any

from desktop.chat.context_offer import offer_for


def test_a_need_past_the_trained_context_offers_the_trained_size_first(services: Any) -> None:
    agent = services.agents.by_name("SmolLM2 (local)").with_changes(n_ctx=2048)
    offer = offer_for(agent, 75_776, services.local.model_info)
    assert (offer.current, offer.needed, offer.trained) == (2048, 75_776, 8192)
    first, second = offer.choices
    assert (first.n_ctx, first.drops_turns, first.beyond_training) == (8192, True, False)
    assert (second.n_ctx, second.beyond_training) == (75_776, True)
    assert "needs about 75,776 tokens" in offer.question and "2,048" in offer.question
    # the KV cache grows with the context: the bigger size says it needs more memory
    assert first.memory != second.memory and second.memory.startswith("about ")


def test_a_need_within_the_trained_context_offers_just_that(services: Any) -> None:
    agent = services.agents.by_name("SmolLM2 (local)").with_changes(n_ctx=512)
    offer = offer_for(agent, 3072, services.local.model_info)
    [choice] = offer.choices
    assert choice.n_ctx == 3072 and not choice.beyond_training and not choice.drops_turns
