"""The `simi` command, run as a user runs it: a subprocess on a real SIMI_HOME."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from desktop import __version__
from tests.helpers.cli import simi


def test_version_via_module_and_console_script(cli_env) -> None:
    out = simi(cli_env, "--version")
    assert out.returncode == 0 and __version__ in out.stdout
    script = Path(sys.executable).with_name("simi")
    out2 = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=cli_env)
    assert out2.returncode == 0 and __version__ in out2.stdout


def test_agents_lifecycle_through_the_cli(cli_env) -> None:
    listed = json.loads(simi(cli_env, "agents", "list", "--json").stdout)
    assert [a["name"] for a in listed] == ["SmolLM2 (local)"]

    out = simi(
        cli_env,
        "agents",
        "add",
        "--name",
        "Vllm box",
        "--kind",
        "openai-compatible",
        "--base-url",
        "http://127.0.0.1:8000/v1",
        "--model",
        "qwen",
        "--system",
        "Be brief",
        "--temperature",
        "0.3",
        "--stop",
        "END",
    )
    assert out.returncode == 0, out.stderr
    shown = json.loads(simi(cli_env, "agents", "show", "Vllm box", "--json").stdout)
    assert shown["base_url"] == "http://127.0.0.1:8000/v1" and shown["temperature"] == 0.3
    assert shown["stop"] == ["END"] and shown["system_prompt"] == "Be brief"
    assert shown["has_api_key"] is False

    assert (
        simi(
            cli_env, "agents", "edit", "Vllm box", "--model", "llama", "--name", "GPU box"
        ).returncode
        == 0
    )
    assert (
        json.loads(simi(cli_env, "agents", "show", "GPU box", "--json").stdout)["model"] == "llama"
    )
    assert simi(cli_env, "agents", "clone", "GPU box").returncode == 0
    names = [a["name"] for a in json.loads(simi(cli_env, "agents", "list", "--json").stdout)]
    assert "GPU box (copy)" in names
    assert simi(cli_env, "agents", "remove", "GPU box").returncode == 0
    names = [a["name"] for a in json.loads(simi(cli_env, "agents", "list", "--json").stdout)]
    assert "GPU box" not in names and "GPU box (copy)" in names


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--name", "", "--kind", "local", "--model-file", "/x.gguf"], "name"),
        (
            ["--name", "SmolLM2 (local)", "--kind", "local", "--model-file", "/x.gguf"],
            "already exists",
        ),
        (
            [
                "--name",
                "A",
                "--kind",
                "openai-compatible",
                "--base-url",
                "not a url",
                "--model",
                "m",
            ],
            "base-url",
        ),
        (
            ["--name", "A", "--kind", "openai", "--model", "m", "--temperature", "9"],
            "between 0 and 2",
        ),
        (["--name", "A", "--kind", "local", "--model-file", "/missing.gguf"], "does not exist"),
    ],
)
def test_invalid_agent_is_refused_with_field_message(cli_env, args, words) -> None:
    out = simi(cli_env, "agents", "add", *args)
    assert out.returncode == 1
    assert words.lower() in out.stderr.lower()
    assert "Traceback" not in out.stderr


def test_unknown_agent_names_the_existing_ones(cli_env) -> None:
    out = simi(cli_env, "agents", "show", "nope", "--json")
    assert out.returncode == 1 and "SmolLM2 (local)" in out.stderr


@pytest.mark.slow
def test_ask_streams_reply_and_prints_stats_json(cli_env) -> None:
    out = simi(cli_env, "ask", "--json", "Name one colour.")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.rstrip("\n").splitlines()
    record = json.loads(lines[-1])
    reply = "\n".join(lines[:-1]).strip()
    assert reply
    for key in (
        "ttft_ms",
        "decode_tok_s",
        "prefill_tok_s",
        "prompt_tokens",
        "output_tokens",
        "finish_reason",
        "total_ms",
        "agent_name",
        "backend",
    ):
        assert key in record
    assert record["finish_reason"] in ("stop", "length") and record["output_tokens"] > 0
    assert record["status"] == "complete"

    # The call is stored like a window conversation, and shows in the aggregates.
    again = simi(cli_env, "ask", "--conversation", str(record["conversation_id"]), "More?")
    assert again.returncode == 0
    stats = json.loads(simi(cli_env, "stats", "--json").stdout)
    assert stats[0]["agent"] == "SmolLM2 (local)" and stats[0]["calls"] == 2
    text = simi(cli_env, "stats", "--agent", "SmolLM2 (local)").stdout
    assert "SmolLM2 (local)" in text and "TTFT p50" in text


def test_corrupt_database_is_reported_and_can_be_moved_aside(cli_env, simi_home) -> None:
    simi_home.mkdir(parents=True)
    db = simi_home / "simi.db"
    db.write_bytes(b"garbage" * 1000)
    out = simi(cli_env, "agents", "list")
    assert out.returncode == 1 and str(db) in out.stderr and "move-aside" in out.stderr
    assert db.read_bytes() == b"garbage" * 1000
    moved = simi(cli_env, "db", "move-aside")
    assert moved.returncode == 0
    assert simi(cli_env, "agents", "list").returncode == 0
    assert len(list(simi_home.glob("simi.db.broken-*"))) == 1


def test_unwritable_home_is_reported(cli_env, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = dict(cli_env, SIMI_HOME=str(blocker / "home"))
    out = simi(env, "agents", "list")
    assert out.returncode == 1 and "cannot write" in out.stderr and "Traceback" not in out.stderr


def test_edit_base_url_carries_the_key_only_within_its_host(cli_env, secret_service_env) -> None:
    """The agent editor's key rule, in the CLI: a key follows the agent to another path or port
    on the same host, never to another host nor from https:// to plain http://."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    key = "sk-cli-host-bound-4417"
    out = simi(
        cli_env,
        *("agents", "add", "--name", "Keyed", "--kind", "openai-compatible"),
        *("--base-url", "https://one.example/v1", "--model", "m", "--api-key-stdin"),
        stdin=key + "\n",
    )
    assert out.returncode == 0, out.stderr

    def edit(url: str) -> subprocess.CompletedProcess:
        done = simi(cli_env, "agents", "edit", "Keyed", "--base-url", url)
        assert done.returncode == 0, done.stderr
        return done

    def stored_key() -> str | None:
        services = Services.open(AppPaths.from_env(cli_env))
        try:
            return services.agents.api_key(services.agents.by_name("Keyed"))
        finally:
            services.close()

    same_host = edit("https://one.example:8443/other/v1")
    assert same_host.stdout == "Saved agent “Keyed”.\n"  # nothing about keys
    assert stored_key() == key

    clear = edit("http://one.example:8443/other/v1")
    assert "plain http:// to one.example" in clear.stdout and "--api-key-stdin" in clear.stdout
    assert stored_key() is None

    edit("https://one.example/v1")  # back to the first endpoint, which kept its key
    assert stored_key() == key
    other_host = edit("https://two.example/v1")
    assert "points at two.example" in other_host.stdout
    assert 'simi agents edit "Keyed" --api-key-stdin' in other_host.stdout
    assert stored_key() is None
    shown = json.loads(simi(cli_env, "agents", "show", "Keyed", "--json").stdout)
    assert shown["has_api_key"] is False and key not in json.dumps(shown)


def test_stats_count_every_outcome_as_itself(cli_env) -> None:
    """Complete, Stop and a context overflow (kept through Retry) each count as what they were."""
    import asyncio

    from desktop.chat.services import Services
    from desktop.llm.events import TextDelta
    from desktop.settings.paths import AppPaths
    from desktop.store.agents import Agent
    from tests.helpers.fault_server import FaultServer, Reply, error_reply, ticking_tokens

    overflow = {
        "error": {
            "message": "This model's maximum context length is 16 tokens.",
            "code": "context_length_exceeded",
        }
    }
    replies = [
        Reply(body=ticking_tokens(3)),
        error_reply(400, overflow),
        Reply(body=ticking_tokens(None), chunk_delay_s=0.02),
        Reply(body=ticking_tokens(2)),
    ]
    services = Services.open(AppPaths.from_env())
    try:
        with FaultServer(replies) as server:
            agent = services.agents.create(
                Agent(
                    name="Remote", kind="openai-compatible", base_url=server.url + "/v1", model="m"
                )
            )
            chat, conv = services.chat, services.conversations.create(agent.id)
            done = asyncio.run(chat.run(chat.begin(conv.id, agent, "one")))
            failed = asyncio.run(chat.run(chat.begin(conv.id, agent, "two")))
            assert (done.status, failed.error.kind) == ("complete", "context_too_long")

            async def stopped() -> str:
                turn = chat.begin(conv.id, agent, "three")
                task: asyncio.Task = asyncio.ensure_future(
                    chat.run(turn, on_event=lambda e: isinstance(e, TextDelta) and task.cancel())
                )
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                return turn.status

            assert asyncio.run(stopped()) == "cancelled"
            retry = chat.begin_retry(conv.id, agent, failed.assistant_message_id)
            assert asyncio.run(chat.run(retry)).status == "complete"
    finally:
        services.close()

    out = simi(cli_env, "stats", "--json")
    assert out.returncode == 0, out.stderr
    (row,) = [r for r in json.loads(out.stdout) if r["agent"] == "Remote"]
    assert (row["calls"], row["complete"], row["cancelled"], row["errors"]) == (4, 2, 1, 1)
    assert row["error_kinds"] == {"context_too_long": 1}
    text = simi(cli_env, "stats", "--agent", "remote").stdout
    header, line = text.splitlines()[:2]
    assert header.split() == [
        "agent", "calls", "cancelled", "errors", "TTFT", "p50", "TTFT", "p95", "decode", "p50",
        "decode", "p95", "tokens", "in", "out", "cached", "cost",
    ]  # fmt: skip
    assert line.split()[:5] == ["Remote", "4", "1", "1", "(25.0%)"]
    assert "errors by kind:" in text and "Remote: context_too_long 1" in text


def test_a_bug_in_a_command_is_reported_without_any_key(simi_home, monkeypatch, capsys) -> None:
    """No traceback on the terminal or in the log shows a key (in-process: a bug on demand)."""
    import logging

    from desktop import cli
    from desktop.settings.paths import AppPaths
    from desktop.settings.secrets import SECRETS_SEEN

    # setup_logging keeps the first handler of the process; this test wants its own log file
    monkeypatch.setattr(logging.getLogger("simi"), "handlers", [])
    key = "sk-cli-crash-7d2b90"
    SECRETS_SEEN.add(key)  # as the keyring read of any agent's key does

    def broken_stats(services, args) -> int:
        raise RuntimeError(f"request failed, Authorization: Bearer {key}")

    monkeypatch.setattr(cli, "_stats", broken_stats)
    assert cli.main(["stats"]) == 1
    err = capsys.readouterr().err
    assert "unexpected error" in err and "Traceback (most recent call last)" in err
    assert "RuntimeError: request failed, Authorization: Bearer [redacted]" in err
    assert key not in err
    for handler in logging.getLogger("simi").handlers:
        handler.flush()
    log_text = AppPaths.from_env().log_path.read_text(encoding="utf-8")
    assert "unexpected error" in log_text and key not in log_text
