"""A document through a real OpenAI-compatible server: llama-cpp-python's ``llama_cpp.server``
on loopback with the starter model (tests/helpers/servers.py). What the tiny model answers is
not checked, only that the document reached the server (its prompt grew by the document's
tokens, as the server counted them) and a reply came back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.store.agents import Agent
from tests.helpers.servers import llama_server

NOTE = (
    "Harbour notice. The ferry to the island leaves at 07:40 from pier four. The secret word "
    "for boarding today is PLUM. Bicycles ride free; dogs must be on a lead.\n"
)


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    """One real llama_cpp.server (starter model) for this module."""
    with llama_server() as base:
        yield base


@pytest.mark.slow
def test_a_document_reaches_a_real_server_and_a_reply_comes_back(
    llama: str, services: Any, tmp_path: Path
) -> None:
    agent = services.agents.create(
        Agent(
            name="Loopback llama.cpp",
            kind="openai-compatible",
            base_url=llama,
            model="smollm2",
            max_tokens=12,
            temperature=0.0,
            seed=1,
        )
    )
    (tmp_path / "notice.txt").write_text(NOTE, encoding="utf-8")
    doc = services.attachments.prepare(tmp_path / "notice.txt").attachment
    chat = services.chat
    question = "What is the secret word?"
    bare = asyncio.run(
        chat.run(chat.begin(services.conversations.create(agent.id).id, agent, question))
    )
    with_doc = asyncio.run(
        chat.run(chat.begin(services.conversations.create(agent.id).id, agent, question, [doc]))
    )
    assert bare.status == with_doc.status == "complete", (bare.error, with_doc.error)
    assert with_doc.text.strip()
    assert bare.stats is not None and with_doc.stats is not None
    assert bare.stats.prompt_tokens is not None and with_doc.stats.prompt_tokens is not None
    grew = with_doc.stats.prompt_tokens - bare.stats.prompt_tokens
    assert grew >= 40  # the notice is ~50 tokens, in its block
    assert with_doc.stats.image_tokens is None  # no image: no image figures
