"""Turns with attachments, through the real chat service and a real SQLite file: what the
request carries (a document's text in a delimited block before the person's words, an image as
a part), that edit and regenerate keep them, that a model that cannot see ends the turn before
anything loads, and the image figures of the stats row.

The remote provider is ``FaultServer`` (tests/helpers/fault_server.py), a loopback stand-in for
an OpenAI-compatible endpoint that records each request's JSON."""

from __future__ import annotations

import asyncio
import base64
import io
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from desktop.attach import prepare as attach_prepare
from desktop.attach.images import estimate_image_tokens, profile_for
from desktop.chat.attachments import AttachmentService
from desktop.chat.session import Turn
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.store.conversations import Conversation
from tests.attach.samples import image_file
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens

SECRET = "The launch code is 4471."


def remote(services: Any, server: FaultServer, name: str = "Remote") -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=server.url + "/v1", model="m")
    )


@contextmanager
def remote_conversation(
    services: Any, tokens: int
) -> Iterator[tuple[FaultServer, Agent, Conversation]]:
    """A loopback provider that answers each call with ``tokens`` tokens, an agent on it and a
    new conversation with that agent; the provider stops on the way out."""
    with FaultServer(lambda _r: Reply(body=ticking_tokens(tokens))) as server:
        agent = remote(services, server)
        yield server, agent, services.conversations.create(agent.id)


def ask(
    services: Any, agent: Agent, conv: Conversation, text: str, items: Sequence[Attachment] = ()
) -> Turn:
    """One question in ``conv`` with ``items`` attached, run to its end."""
    chat = services.chat
    return asyncio.run(chat.run(chat.begin(conv.id, agent, text, items)))


def attach(services: Any, path: Path) -> Attachment:
    attachments: AttachmentService = services.attachments
    return attachments.prepare(path).attachment


def document(services: Any, tmp_path: Path, text: str = SECRET, name: str = "notes.txt") -> Any:
    path = tmp_path / name
    path.write_text(text + "\n", encoding="utf-8")
    return attach(services, path)


def picture(services: Any, tmp_path: Path, size: tuple[int, int] = (40, 30)) -> Attachment:
    return attach(services, image_file(tmp_path / "dot.png", size, noisy=False))


def user_message(body: dict[str, Any]) -> dict[str, Any]:
    return [m for m in body["messages"] if m["role"] == "user"][-1]


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")


def test_a_document_goes_as_text_before_the_words_and_an_image_as_a_part(
    services: Any, tmp_path: Path
) -> None:
    chat = services.chat
    with remote_conversation(services, tokens=3) as (server, agent, conv):
        doc, img = document(services, tmp_path), picture(services, tmp_path)
        turn = chat.begin(conv.id, agent, "What do these say?", [doc, img])
        done = asyncio.run(chat.run(turn))
        (request,) = server.requests
    assert done.status == "complete", done.error
    message = user_message(request.json())
    text, image = message["content"]
    assert text["type"] == "text"
    assert text["text"].startswith('<document name="notes.txt">\n' + SECRET)
    assert text["text"].endswith("</document>\n\nWhat do these say?")
    url = image["image_url"]["url"]
    assert image["type"] == "image_url" and url.startswith("data:image/")
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (40, 30)

    # stored with the question, in order, and what the view is handed
    assert done.attachments == [doc, img]
    assert chat.attachments_of([turn.user_message_id]) == {turn.user_message_id: [doc, img]}
    assert services.conversations.get(conv.id).title == "What do these say?"

    # the stats row: no count reported, so the images' tokens are estimated and say so
    row = services.stats.for_message(turn.assistant_message_id)
    expected = estimate_image_tokens(40, 30, profile_for("openai-compatible"))
    assert (row["image_tokens"], row["image_tokens_estimated"]) == (expected, 1)
    assert row["image_encode_ms"] is None  # remote: no projector timing


def test_edit_keeps_the_attachments_and_regenerate_sends_them_again(
    services: Any, tmp_path: Path
) -> None:
    chat = services.chat
    with remote_conversation(services, tokens=2) as (server, agent, conv):
        doc = document(services, tmp_path)
        first = ask(services, agent, conv, "Read it.", [doc])
        again = asyncio.run(
            chat.run(chat.begin_regenerate(conv.id, agent, first.assistant_message_id))
        )
        edited = asyncio.run(
            chat.run(chat.begin_edit(conv.id, agent, first.user_message_id, "Read it twice."))
        )
        bare = asyncio.run(
            chat.run(chat.begin_edit(conv.id, agent, first.user_message_id, "Nothing.", []))
        )
        bodies = [text_of(user_message(r.json())) for r in server.requests]
    assert [t.status for t in (first, again, edited, bare)] == ["complete"] * 4
    assert again.user_message_id == first.user_message_id  # the same question, sent again
    assert SECRET in bodies[0] and SECRET in bodies[1]
    assert SECRET in bodies[2] and bodies[2].endswith("Read it twice.")
    assert bodies[3] == "Nothing."
    assert edited.attachments == [doc] and bare.attachments == []
    kept = chat.attachments_of([first.user_message_id, edited.user_message_id])
    assert kept == {first.user_message_id: [doc], edited.user_message_id: [doc]}


def test_earlier_questions_keep_their_documents_in_later_turns(
    services: Any, tmp_path: Path
) -> None:
    with remote_conversation(services, tokens=2) as (server, agent, conv):
        ask(services, agent, conv, "Read it.", [document(services, tmp_path)])
        ask(services, agent, conv, "And now?")
        body = server.requests[-1].json()
    users = [m for m in body["messages"] if m["role"] == "user"]
    assert SECRET in text_of(users[0]) and text_of(users[1]) == "And now?"


def test_a_local_model_that_cannot_see_ends_the_turn_before_anything_loads(
    services: Any, tmp_path: Path
) -> None:
    """The starter model has no vision projector: an image ends the turn at once, in words,
    stored on the reply like any error; no llama.cpp worker is started."""
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    img = picture(services, tmp_path)
    conv = services.conversations.create(agent.id)
    turn = ask(services, agent, conv, "What is this?", [img])
    assert turn.status == "error" and turn.error is not None
    assert turn.error.kind == "attachment"
    assert "cannot read images" in turn.error.user_message
    assert "remove the image" in turn.error.user_message
    stored = services.conversations.message(turn.assistant_message_id)
    assert (stored.status, stored.error_kind) == ("error", "attachment")
    assert stored.error_text == turn.error.user_message
    assert all(worker.pid is None for worker in services.local.workers)
    row = services.stats.for_message(turn.assistant_message_id)
    assert row["error_kind"] == "attachment" and row["prompt_tokens"] is None
    assert services.attachments.vision_problem(agent, [img]) == turn.error.user_message


def test_a_remote_agent_is_taken_to_see(services: Any, tmp_path: Path) -> None:
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        agent = remote(services, server)
    assert services.attachments.vision_problem(agent, [picture(services, tmp_path)]) is None


def test_a_file_gone_from_the_data_folder_is_an_error_on_the_reply(
    services: Any, tmp_path: Path
) -> None:
    with remote_conversation(services, tokens=1) as (server, agent, conv):
        doc = document(services, tmp_path)
        turn = services.chat.begin(conv.id, agent, "Read it.", [doc])
        for path in services.attachments.store.path(doc.sha256).parent.glob(doc.sha256 + "*"):
            path.unlink()
        done = asyncio.run(services.chat.run(turn))
        assert server.requests == []  # nothing sent half-built
    assert done.status == "error" and done.error.kind == "attachment"
    assert "notes.txt" in done.error.user_message


def test_one_shot_calls_take_attachments(services: Any, tmp_path: Path) -> None:
    """A prompt-set call (``ask_once``): the prompt with its document; an image for a local
    model that cannot see is an error result, not a call."""
    chat = services.chat
    with FaultServer(lambda _r: Reply(body=ticking_tokens(2))) as server:
        agent = remote(services, server)
        doc = document(services, tmp_path)
        one = asyncio.run(chat.ask_once(agent, "Summarise.", attachments=[doc]))
        (request,) = server.requests
    assert one.status == "complete"
    sent = text_of(user_message(request.json()))
    assert SECRET in sent and sent.endswith("Summarise.")
    starter = services.agents.by_name(STARTER_AGENT_NAME)
    refused = asyncio.run(
        chat.ask_once(starter, "Describe.", attachments=[picture(services, tmp_path)])
    )
    assert (refused.status, refused.error_kind) == ("error", "attachment")
    assert "cannot read images" in (refused.error_text or "")


def test_images_are_sized_and_documents_read_off_the_event_loop(
    services: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resizing an image the first time (Pillow) and reading a document's text are blocking
    file work: they run on a worker thread, never on the loop's."""
    ran_on: list[str] = []
    real_image, real_text = attach_prepare.prepare_image, attach_prepare.document_text

    def prepare_image(*args: Any, **kwargs: Any) -> Any:
        ran_on.append(threading.current_thread().name)
        return real_image(*args, **kwargs)

    def document_text(*args: Any, **kwargs: Any) -> Any:
        ran_on.append(threading.current_thread().name)
        return real_text(*args, **kwargs)

    with remote_conversation(services, tokens=1) as (_server, agent, conv):
        items = [document(services, tmp_path), picture(services, tmp_path, (300, 200))]
        monkeypatch.setattr(attach_prepare, "prepare_image", prepare_image)
        monkeypatch.setattr("desktop.chat.attachments.document_text", document_text)
        done = ask(services, agent, conv, "", items)
    assert done.status == "complete"
    assert len(ran_on) == 2 and threading.main_thread().name not in ran_on
    # a question of attachments only is titled by the first one
    assert services.conversations.get(conv.id).title == "notes.txt"
