"""Knowledge in a conversation, through the real chat service, a real SQLite file and real
files on disk: a collection of a folder, indexed, searched before an agent's turn; what the
request carries (numbered passages before the question, the request to cite them), the
passages stored on the reply, the stats row's retrieval figures and the timeline's segments.

The remote provider is ``FaultServer`` (tests/helpers/fault_server.py), a loopback stand-in
for an OpenAI-compatible endpoint that records each request's JSON. Keyword search only: the
embedding model has tests of its own (tests/local/test_embedder.py, tests/knowledge/)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from desktop.chat.knowledge import CITE_REQUEST
from desktop.chat.timeline import build_timeline
from desktop.errors import ValidationError
from desktop.store.agents import Agent
from desktop.store.stats import EVERY_CALL
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens

PLANTS = """# Plants

Ferns like shade and damp soil.

## Watering

Water the zanzibar gem once a month; it stores water in its rhizomes.
"""
CARS = "The car needs new tyres before winter.\nCheck the oil every month.\n"


def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "plants.md").write_text(PLANTS, encoding="utf-8")
    (root / "cars.txt").write_text(CARS, encoding="utf-8")
    return root


def remote(services: Any, server: FaultServer, name: str = "Reader") -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=server.url + "/v1", model="m")
    )


def user_text(body: dict[str, Any]) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def indexed(services: Any, tmp_path: Path, name: str = "Notes") -> Any:
    collection = services.knowledge.create(name, [folder(tmp_path)])
    report = services.knowledge.index(collection)
    assert (report.files, report.added, report.skipped) == (2, 2, ())
    return collection


def test_an_agents_turn_gets_numbered_passages_and_the_reply_keeps_them(
    services: Any, tmp_path: Path
) -> None:
    knowledge = services.knowledge
    collection = indexed(services, tmp_path)
    with FaultServer(lambda _r: Reply(body=ticking_tokens(2))) as server:
        agent = remote(services, server)
        knowledge.set_agent_collections(agent.id, [collection])
        conv = services.conversations.create(agent.id)
        turn = services.chat.begin(conv.id, agent, "How often should I water the zanzibar gem?")
        done = asyncio.run(services.chat.run(turn))
        (request,) = server.requests
    assert done.status == "complete", done.error
    sent = user_text(request.json())
    # the passage with the rare word first, numbered, in its block; then the request; then
    # the person's words, last and unchanged
    assert sent.startswith('<document name="[1] plants.md, lines ')
    assert "zanzibar gem once a month" in sent.split("</document>")[0]
    assert sent.endswith(f"{CITE_REQUEST}\n\nHow often should I water the zanzibar gem?")
    first = done.sources[0]
    assert (first.position, first.collection, Path(first.path).name) == (1, "Notes", "plants.md")
    assert first.start_line is not None and first.start_line <= 7 <= (first.end_line or 0)
    # the stored question is the person's own words; the reply keeps what it was given
    assert services.conversations.message(turn.user_message_id).content.startswith("How often")
    stored = knowledge.sources_of([turn.assistant_message_id])[turn.assistant_message_id]
    assert stored == list(done.sources)

    row = services.stats.for_message(turn.assistant_message_id)
    assert row["retrieval_chunks"] == len(done.sources) >= 1
    assert row["retrieval_ms"] is not None and row["retrieval_ms"] >= row["retrieval_search_ms"]
    assert row["retrieval_ms"] <= row["ttft_ms"]  # part of the wait after Send
    assert row["retrieval_tokens"] == done.retrieval.tokens > len(PLANTS) // 8
    timeline = build_timeline(row)  # the search in a lane of its own, from Send
    search = timeline.retrieval_segments
    assert [s.key for s in search][-2:] == ["retrieval_search", "retrieval_read"]
    assert search[0].start_ms == 0 and {s.kind for s in search} == {"retrieval"}
    assert timeline.segments[0].start_ms == search[-1].end_ms  # then the call's own parts
    assert timeline.retrieval_lane_label.startswith("Knowledge search")
    assert "Knowledge search" in timeline.as_text()
    assert timeline.fact("retrieval").value.startswith(f"{len(done.sources)} passage")
    # the search's time per agent over time: a chart of its own on the Stats page
    (point,) = services.stats.series(EVERY_CALL, "retrieval_ms")
    assert (point["agent"], point["value"]) == ("Reader", row["retrieval_ms"])


def test_an_agent_without_collections_sends_the_question_alone(
    services: Any, tmp_path: Path
) -> None:
    indexed(services, tmp_path)
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
        conv = services.conversations.create(agent.id)
        done = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "zanzibar?")))
        (request,) = server.requests
    assert user_text(request.json()) == "zanzibar?"
    assert done.sources == () and done.retrieval is None
    row = services.stats.for_message(done.assistant_message_id)
    assert row["retrieval_ms"] is None and row["retrieval_chunks"] is None
    assert build_timeline(row).retrieval_segments == ()


def test_a_collection_not_indexed_yet_is_said_and_the_turn_goes_on(
    services: Any, tmp_path: Path
) -> None:
    collection = services.knowledge.create("Later", [folder(tmp_path)])
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
        services.knowledge.set_agent_collections(agent.id, [collection])
        conv = services.conversations.create(agent.id)
        done = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "tyres?")))
        (request,) = server.requests
    assert done.status == "complete"
    assert done.notice == "“Later” has not been indexed yet."
    assert user_text(request.json()) == "tyres?"  # nothing found: the question alone
    row = services.stats.for_message(done.assistant_message_id)
    assert (row["retrieval_chunks"], row["retrieval_tokens"]) == (0, 0)


def test_regenerate_searches_again_and_a_clone_searches_the_same_collections(
    services: Any, tmp_path: Path
) -> None:
    collection = indexed(services, tmp_path)
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
        services.knowledge.set_agent_collections(agent.id, [collection])
        copy = services.agents.clone(agent, "Reader 2")
        assert [c.name for c in services.knowledge.agent_collections(copy.id)] == ["Notes"]
        conv = services.conversations.create(agent.id)
        first = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "the oil?")))
        again = services.chat.begin_regenerate(conv.id, agent, first.assistant_message_id)
        again = asyncio.run(services.chat.run(again))
    assert [Path(s.path).name for s in again.sources][:1] == ["cars.txt"]
    assert again.sources == first.sources
    kept = services.knowledge.sources_of([first.assistant_message_id, again.assistant_message_id])
    assert set(kept) == {first.assistant_message_id, again.assistant_message_id}


def test_collections_are_checked_and_removing_one_leaves_the_files(
    services: Any, tmp_path: Path
) -> None:
    knowledge = services.knowledge
    root = folder(tmp_path)
    with pytest.raises(ValidationError) as empty:
        knowledge.create("  ", [])
    assert set(empty.value.fields) == {"name", "paths"}
    with pytest.raises(ValidationError) as missing:
        knowledge.create("Gone", [tmp_path / "nowhere"])
    assert "was not found" in missing.value.fields["paths"]
    made = knowledge.create("Notes", [root, root / "plants.md", root])
    assert made.paths == (str(root.resolve()), str((root / "plants.md").resolve()))
    with pytest.raises(ValidationError) as taken:
        knowledge.create("notes", [root])
    assert "already a collection named “Notes”" in taken.value.fields["name"]
    with pytest.raises(ValidationError) as model:
        knowledge.update(made, embedder=tmp_path / "missing.gguf")
    assert "embedding model" in model.value.fields["embedder"]

    knowledge.index(made)
    index_file = knowledge.index_path(made)
    assert index_file.exists() and knowledge.state(made).chunks >= 2
    knowledge.delete(made)
    assert not index_file.exists() and knowledge.collections() == []
    assert (root / "plants.md").read_text(encoding="utf-8") == PLANTS  # never touched


@pytest.mark.slow
def test_a_collection_with_an_embedding_model_finds_by_meaning(
    services: Any, tmp_path: Path
) -> None:
    """The starter model in llama.cpp's embedding mode stands in for an embedding model (it is
    a chat model, but the only GGUF the tests have offline): a question that shares no word
    with a file still finds it by meaning, and the search's parts are timed."""
    from desktop.local.starter import starter_model_path

    model = starter_model_path()
    if model is None:
        pytest.skip("the starter model's wheel is not installed")
    root = tmp_path / "meaning"
    root.mkdir()
    (root / "pets.txt").write_text("The cat sat on the mat.\n", encoding="utf-8")
    (root / "money.txt").write_text("Quarterly revenue grew 4%.\n", encoding="utf-8")
    knowledge = services.knowledge
    collection = knowledge.create("Meaning", [root], embedder=model)
    knowledge.index(collection)
    found = knowledge.search([collection], "a kitten was sitting on a rug")
    assert [Path(s.path).name for s in found.sources][:1] == ["pets.txt"]
    assert found.embed_ms > 0 and found.search_ms > 0
    # keyword search alone (the model taken away) finds nothing for those words
    plain = knowledge.update(collection, embedder=None)
    assert knowledge.search([plain], "a kitten was sitting on a rug").sources == ()


@pytest.mark.slow
def test_an_embedding_model_whose_process_died_is_started_again(
    services: Any, tmp_path: Path
) -> None:
    """The embedding model's process killed (as the out-of-memory killer would) between two
    questions: the next search starts it again instead of failing every turn after."""
    import os
    import signal

    from desktop.local.starter import starter_model_path

    model = starter_model_path()
    if model is None:
        pytest.skip("the starter model's wheel is not installed")
    knowledge = services.knowledge
    collection = knowledge.create("Meaning", [folder(tmp_path)], embedder=model)
    knowledge.index(collection)
    first = knowledge.search([collection], "watering plants")
    shared = knowledge._embedders[str(model.resolve())]  # the process the service keeps
    os.kill(shared._inner.pid, signal.SIGKILL)
    again = knowledge.search([collection], "watering plants")
    assert again.sources == first.sources and again.embed_ms > 0
    assert shared._inner.pid is not None and shared._inner.alive


def test_a_call_outside_a_conversation_searches_too(services: Any, tmp_path: Path) -> None:
    """Prompt-set runs, `simi bench` and the API server's calls (``one_shot``): the agent's
    collections are searched for the last question, and the row says so."""
    collection = indexed(services, tmp_path)
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
        services.knowledge.set_agent_collections(agent.id, [collection])
        shot = asyncio.run(services.chat.ask_once(agent, "When are the tyres due?"))
        (request,) = server.requests
    assert shot.status == "complete"
    sent = user_text(request.json())
    assert sent.startswith('<document name="[1] cars.txt, lines 1–2">')
    assert sent.endswith(f"{CITE_REQUEST}\n\nWhen are the tyres due?")
    assert [Path(s.path).name for s in shot.sources][:1] == ["cars.txt"]
    assert shot.stats is not None and shot.stats.retrieval_chunks == len(shot.sources)
    assert shot.stats.retrieval_tokens and shot.stats.retrieval_ms is not None


def test_while_the_search_runs_the_reply_says_so(
    services: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiting line of the window and of `simi ask` (``StatsClock.waiting_for``) names
    the collections being searched, until the search ends."""
    collection = indexed(services, tmp_path)
    knowledge = services.knowledge
    seen: list[str | None] = []
    real = knowledge.search

    def watched(collections: Any, question: str) -> Any:
        seen.append(turn.clock.waiting_for(remote=True))  # the search runs now
        return real(collections, question)

    monkeypatch.setattr(knowledge, "search", watched)
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
        knowledge.set_agent_collections(agent.id, [collection])
        conv = services.conversations.create(agent.id)
        turn = services.chat.begin(conv.id, agent, "the oil?")
        asyncio.run(services.chat.run(turn))
    assert seen == ["searching Notes"]
    assert turn.clock.searching is None


def test_a_damaged_index_is_said_in_words_and_made_anew_by_the_next_index(
    services: Any, tmp_path: Path
) -> None:
    """The index file overwritten with garbage (a disk error, a sync tool): the turn goes on
    without passages and says why, the state says it in words, and indexing again sets the
    damaged file aside and builds a new one from the files."""
    from desktop.chat.knowledge import DAMAGED, KnowledgeError

    knowledge = services.knowledge
    collection = indexed(services, tmp_path)
    index_file = knowledge.index_path(collection)
    knowledge.search([collection], "tyres")  # open on the search thread, as after a turn
    knowledge.update(collection, name="Notes")  # (an edit closes it there)
    index_file.write_bytes(b"this is not a database" * 500)
    for extra in (index_file.with_name(index_file.name + "-wal"),):
        extra.unlink(missing_ok=True)
    with pytest.raises(KnowledgeError) as said:
        knowledge.search([collection], "tyres")
    assert said.value.user_message == DAMAGED
    with pytest.raises(KnowledgeError):
        knowledge.state(collection)

    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
        knowledge.set_agent_collections(agent.id, [collection])
        conv = services.conversations.create(agent.id)
        done = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "tyres?")))
        (request,) = server.requests
    assert done.status == "complete" and user_text(request.json()) == "tyres?"
    assert done.notice == f"Knowledge was not searched: {DAMAGED}"

    report = knowledge.index(collection)
    assert (report.files, report.added) == (2, 2)
    assert index_file.with_name(index_file.name + ".damaged").exists()
    found = knowledge.search([collection], "tyres")
    assert [Path(s.path).name for s in found.sources] == ["cars.txt"]


def test_a_full_disk_stops_indexing_in_words_and_keeps_what_was_done(
    services: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's "database or disk is full" on the second file written (fault injection: it
    stands in for a disk that fills up while indexing): the run stops with words that say
    what to do, the first file stays indexed, and the next run goes on."""
    from desktop.chat.knowledge import KnowledgeError
    from desktop.knowledge.index import KnowledgeIndex

    knowledge = services.knowledge
    collection = knowledge.create("Notes", [folder(tmp_path)])
    real = KnowledgeIndex._write_file
    writes: list[int] = []

    def filling(self: Any, *args: Any, **kwargs: Any) -> Any:
        writes.append(1)
        if len(writes) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KnowledgeIndex, "_write_file", filling)
    with pytest.raises(KnowledgeError) as said:
        knowledge.index(collection)
    assert said.value.user_message.startswith("The disk is full: indexing “Notes” stopped.")
    assert knowledge.state(collection).files == 1
    monkeypatch.undo()
    assert knowledge.index(collection).added == 1
