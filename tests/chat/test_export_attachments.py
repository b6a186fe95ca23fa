"""Export and import keep attachments: the JSON carries each file (base64, with its SHA-256),
a Markdown export puts them in a folder beside it linked by relative path, and an import stores
them again, each file once. Real files, a real SQLite file."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from desktop import cli
from desktop.chat.export import (
    ExportError,
    Stores,
    import_conversations,
    to_json,
    write_export,
)
from desktop.local.starter import STARTER_AGENT_NAME
from tests.attach.samples import image_file


def _conversation(services: Any, tmp_path: Path) -> tuple[int, list[Any]]:
    """A question with a document and an image (two named alike), and a reply."""
    (tmp_path / "notes.txt").write_text("tide tables\n", encoding="utf-8")
    image = image_file(tmp_path / "chart.png", (16, 12), noisy=False)
    other = tmp_path / "other"
    other.mkdir()
    second = image_file(other / "chart.png", (12, 16), noisy=False)
    attach = services.attachments.prepare
    items = [attach(tmp_path / "notes.txt"), attach(image), attach(second)]
    attachments = [p.attachment for p in items]
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    conv = services.conversations.create(agent.id, "Tides")
    turn = services.chat.begin(conv.id, agent, "When is high tide?", attachments)
    services.conversations.finish_message(
        turn.assistant_message_id, content="At noon.", status="complete"
    )
    return conv.id, attachments


def test_json_round_trip_restores_the_files_once(services: Any, tmp_path: Path) -> None:
    conv_id, attached = _conversation(services, tmp_path)
    store = services.attachments.store
    data = json.loads(
        json.dumps(to_json(Stores(services.conversations, services.stats, store), conv_id))
    )
    question = next(m for m in data["messages"] if m["role"] == "user")
    carried = question["attachments"]
    assert [a["name"] for a in carried] == ["notes.txt", "chart.png", "chart.png"]
    assert data["version"] == 2
    for item, original in zip(carried, attached, strict=True):
        raw = base64.b64decode(item["data"])
        assert hashlib.sha256(raw).hexdigest() == item["sha256"] == original.sha256
        assert (item["kind"], item["mime"]) == (original.kind, original.mime)

    # the original goes for good, and its files with it
    services.conversations.delete(conv_id)
    services.attachments.wait_collected(5)
    assert not any(store.has(a.sha256) for a in attached)

    (first,) = import_conversations(
        data, Stores(services.conversations, services.stats, store, agents=services.agents)
    )
    (second,) = import_conversations(
        data, Stores(services.conversations, services.stats, store, agents=services.agents)
    )
    for conv in (first, second):
        user = services.conversations.messages(conv)[0]
        assert services.chat.attachments_of([user.id])[user.id] == attached
    assert all(store.has(a.sha256) for a in attached)
    rows = services.db.execute("SELECT COUNT(*) FROM attachment_files").fetchone()[0]
    assert rows == 3  # each file once, however many conversations use it
    text = store.path(attached[0].sha256).read_text(encoding="utf-8")
    assert text == "tide tables\n"


def test_an_export_without_attachments_stays_version_1(services: Any) -> None:
    conv = services.conversations.create(None, "Plain")
    services.conversations.add_message(conv.id, "user", "hi")
    data = to_json(
        Stores(services.conversations, services.stats, services.attachments.store), conv.id
    )
    assert data["version"] == 1 and "attachments" not in data["messages"][0]


def test_a_damaged_attachment_stops_the_import_and_leaves_nothing(
    services: Any, tmp_path: Path
) -> None:
    conv_id, attached = _conversation(services, tmp_path)
    store = services.attachments.store
    data = to_json(Stores(services.conversations, services.stats, store), conv_id)
    services.conversations.delete(conv_id)
    services.attachments.wait_collected(5)
    question = next(m for m in data["messages"] if m["role"] == "user")
    question["attachments"][2]["data"] = base64.b64encode(b"not the chart").decode()
    before = len(services.conversations.list())
    with pytest.raises(ExportError, match="does not match its checksum"):
        import_conversations(data, Stores(services.conversations, services.stats, store))
    assert len(services.conversations.list()) == before
    assert not any(store.has(a.sha256) for a in attached)


def test_markdown_export_writes_the_files_beside_it(services: Any, tmp_path: Path) -> None:
    conv_id, _attached = _conversation(services, tmp_path)
    out = tmp_path / "export" / "Tides.md"
    out.parent.mkdir()
    written = write_export(
        Stores(services.conversations, services.stats, services.attachments.store),
        conv_id,
        "md",
        out,
    )
    folder = out.parent / "Tides_files"
    assert written == [out, folder]
    assert sorted(p.name for p in folder.iterdir()) == ["chart (2).png", "chart.png", "notes.txt"]
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "tide tables\n"
    assert (folder / "chart (2).png").read_bytes() == (
        tmp_path / "other" / "chart.png"
    ).read_bytes()
    md = out.read_text(encoding="utf-8")
    assert "- [notes.txt](<Tides_files/notes.txt>)" in md
    assert "![chart.png](<Tides_files/chart.png>)" in md
    assert "![chart.png](<Tides_files/chart (2).png>)" in md


def test_a_name_from_an_imported_file_never_leaves_the_export_folder(
    services: Any, tmp_path: Path
) -> None:
    data = {
        "format": "simi-multi/conversation",
        "version": 2,
        "conversation": {"title": "Sneaky"},
        "messages": [
            {
                "id": 1,
                "role": "user",
                "content": "look",
                "attachments": [
                    {
                        "name": "../../escape.txt",
                        "kind": "document",
                        "mime": "text/plain",
                        "data": base64.b64encode(b"inside\n").decode(),
                    }
                ],
            }
        ],
    }
    store = services.attachments.store
    (conv_id,) = import_conversations(data, Stores(services.conversations, services.stats, store))
    out = tmp_path / "deep" / "er" / "Sneaky.md"
    out.parent.mkdir(parents=True)
    write_export(Stores(services.conversations, services.stats, store), conv_id, "md", out)
    assert (out.parent / "Sneaky_files" / "escape.txt").read_text() == "inside\n"
    assert (
        not (tmp_path / "escape.txt").exists() and not (tmp_path / "deep" / "escape.txt").exists()
    )


def test_simi_export_and_import_carry_attachments(
    services: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv_id, _attached = _conversation(services, tmp_path)
    services.close()  # the command opens its own, as a terminal would
    out = tmp_path / "tides.json"
    assert cli.main(["export", str(conv_id), "--format", "json", "-o", str(out)]) == 0
    md = tmp_path / "tides.md"
    assert cli.main(["export", str(conv_id), "-o", str(md)]) == 0
    assert "tides_files" in capsys.readouterr().err
    assert (tmp_path / "tides_files" / "notes.txt").is_file()
    assert cli.main(["import", str(out)]) == 0
    assert "Imported “Tides”" in capsys.readouterr().out
    carried = json.loads(out.read_text(encoding="utf-8"))
    names = [a["name"] for m in carried["messages"] for a in m.get("attachments", ())]
    assert names == ["notes.txt", "chart.png", "chart.png"]
