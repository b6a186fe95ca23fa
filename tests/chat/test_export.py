"""Export to Markdown and JSON (every version, stats, no secret) and import, also via `simi`."""

from __future__ import annotations

import json

from desktop.chat.export import Stores, from_json, to_json, to_markdown
from desktop.store.agents import Agent
from tests.helpers.cli import simi
from tests.helpers.stats_rows import record_reply_stats

SECRET = "sk-test-SECRET-never-exported-123"


def _conversation(services) -> int:
    agent = services.agents.create(
        Agent(name="Remote", kind="openai", model="gpt-4o-mini"), api_key=SECRET
    )
    store = services.conversations
    conv = store.create(agent.id, "Sea facts")
    question = store.add_message(conv.id, "user", "How deep is the sea?")
    first = store.add_message(
        conv.id,
        "assistant",
        "About 3.7 km on average.",
        agent_id=agent.id,
        agent_name=agent.name,
        model=agent.model,
        reasoning="Recall the mean depth.",
    )
    record_reply_stats(
        services,
        first,
        "openai",
        started_at="2025-01-01",
        ttft_ms=120.0,
        output_tokens=9,
        cost_usd=0.0002,
        finish_reason="stop",
        endpoint_host="api.openai.com",
    )
    store.add_message(
        conv.id,
        "assistant",
        "| ocean | depth |\n|---|---|\n| Pacific | 4.0 km |",
        parent_id=question.id,
        agent_name=agent.name,
    )
    return conv.id


def test_json_export_holds_every_version_and_stats_and_no_secret(services) -> None:
    conv_id = _conversation(services)
    data = to_json(Stores(services.conversations, services.stats), conv_id)
    text = json.dumps(data)
    assert SECRET not in text and "key_ref" not in text
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "assistant"]
    assert data["messages"][1]["stats"]["ttft_ms"] == 120.0
    assert data["messages"][1]["reasoning"] == "Recall the mean depth."
    assert len(data["active_path"]) == 2 and data["active_path"][-1] == data["messages"][2]["id"]


def test_markdown_export_reads_as_the_conversation_on_show(services) -> None:
    md = to_markdown(Stores(services.conversations, services.stats), _conversation(services))
    assert md.startswith("# Sea facts\n")
    assert "## You\n\nHow deep is the sea?" in md
    assert "| Pacific | 4.0 km |" in md and "3.7 km" not in md  # the active version only


def test_import_recreates_versions_active_branch_and_stats(services) -> None:
    conv_id = _conversation(services)
    data = json.loads(json.dumps(to_json(Stores(services.conversations, services.stats), conv_id)))
    new_id = from_json(data, Stores(services.conversations, services.stats, agents=services.agents))
    store = services.conversations
    assert new_id != conv_id and store.get(new_id).title == "Sea facts"
    path = store.messages(new_id)
    assert [m.content[:7] for m in path] == ["How dee", "| ocean"]
    assert store.versions(path[1].id).count == 2
    store.switch_version(path[1].id, -1)
    old = store.messages(new_id)[1]
    assert old.content.startswith("About 3.7") and old.agent_id is not None  # matched by name
    assert services.stats.for_message(old.id)["ttft_ms"] == 120.0


def test_simi_export_and_import_on_the_command_line(services, cli_env, tmp_path) -> None:
    conv_id = _conversation(services)
    md = simi(cli_env, "export", str(conv_id), "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "# Sea facts" in md.stdout
    out = tmp_path / "sea.json"
    by_title = simi(cli_env, "export", "sea facts", "--format", "json", "-o", str(out))
    assert by_title.returncode == 0, by_title.stderr
    assert SECRET not in out.read_text()
    imported = simi(cli_env, "import", str(out))
    assert imported.returncode == 0, imported.stderr
    assert "Imported “Sea facts”" in imported.stdout
    missing = simi(cli_env, "export", "no such thing")
    assert missing.returncode == 1 and "no conversation" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    assert "not a SIMI Multi conversation" in simi(cli_env, "import", str(bad)).stderr
