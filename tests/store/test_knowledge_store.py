"""The knowledge tables (m015) in a real SQLite file: collections, which agents search them,
and the passages of replies, which outlive a removed collection and go with their message."""

from __future__ import annotations

from desktop.store.agents import Agent, AgentStore
from desktop.store.conversations import ConversationStore
from desktop.store.db import Database
from desktop.store.knowledge import Collection, KnowledgeStore, Source


def test_collections_agents_and_sources(db: Database) -> None:
    store = KnowledgeStore(db)
    agents = AgentStore(db)
    agent = agents.insert(Agent(name="Reader", kind="local", model="m", model_path="/m.gguf"))
    notes = store.add(Collection("Notes", ("/home/a/notes", "/home/a/todo.md")))
    code = store.add(Collection("Code", ("/src",), embedder="/models/e.gguf"))
    assert [c.name for c in store.all()] == ["Code", "Notes"]
    assert store.by_name("notes") == notes and notes.paths == ("/home/a/notes", "/home/a/todo.md")
    assert code.embedder == "/models/e.gguf"

    store.set_agent_collections(agent.id, [notes.id, code.id, notes.id])
    assert [c.name for c in store.agent_collections(agent.id)] == ["Code", "Notes"]
    renamed = store.update(Collection("Work notes", notes.paths, id=notes.id))
    assert renamed.name == "Work notes" and store.agents_using(notes.id) == [agent.id]

    conversations = ConversationStore(db)
    conv = conversations.create(agent.id)
    reply = conversations.add_message(conv.id, "assistant", "See [1].")
    sources = [
        Source(1, "Notes", "/home/a/notes/a.md", 3, 9, None, 0.03, "alpha"),
        Source(2, "Code", "/src/b.pdf", 1, 4, 2, 0.01, "beta"),
    ]
    store.add_sources(reply.id, sources)
    assert store.sources_of([reply.id, 999]) == {reply.id: sources}
    assert sources[0].place == "lines 3–9" and sources[1].place == "page 2, lines 1–4"
    assert Source(3, "c", "/x", 5, 5, None, None, "t").place == "line 5"

    # a removed collection: no agent searches it; the reply keeps what it was given
    assert store.delete(code.id)
    assert [c.name for c in store.agent_collections(agent.id)] == ["Work notes"]
    assert store.sources_of([reply.id]) == {reply.id: sources}
    # the message gone: its passages too
    conversations.delete_message(reply.id)
    assert store.sources_of([reply.id]) == {}
    # the agent gone: its links too
    agents.delete(agent.id)
    assert store.agents_using(notes.id) == []
