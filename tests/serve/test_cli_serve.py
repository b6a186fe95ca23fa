"""``simi serve keys add / list / show / revoke`` on a real SIMI_HOME and the real keyring: the
key is printed once, listed by its hint only, works on a running server, and stops working
when revoked. ``add`` runs as a subprocess, as a user runs it; the rest in-process through
``desktop.cli.main`` (the same code, without a Python start each)."""

from __future__ import annotations

import asyncio
import json

import pytest

from desktop.cli import main
from tests.helpers import cli
from tests.serve.support import bearer, chat_body, client, serving


def _simi(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


async def _calls(services, key: str) -> tuple[int, int]:
    """(GET /v1/models, POST to a model) statuses for ``key`` on a server that needs keys."""
    from desktop.serve.config import ServeConfig

    config = ServeConfig(port=0, require_key=True)
    async with serving(services, config) as server, client(server) as http:
        models = await http.get("/v1/models", headers=bearer(key))
        chat = await http.post("/v1/chat/completions", json=chat_body("nope"), headers=bearer(key))
    return models.status_code, chat.status_code


def test_keys_add_list_show_and_revoke(
    services, cli_env: dict, secret_service_env: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    added = cli.simi(cli_env, "serve", "keys", "add", "editor")
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip()
    assert added.stdout == key + "\n" and key.startswith("simi-") and len(key) == 48
    assert "editor" in added.stderr and "Bearer" in added.stderr
    assert "Traceback" not in added.stderr

    # the key another process made works on this process's server
    assert asyncio.run(_calls(services, key)) == (200, 404)

    code, out, _err = _simi(capsys, "serve", "keys", "list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:2] == ["NAME", "KEY"]
    assert row.startswith("editor") and key not in out
    assert key[:9] in row and key[-4:] in row  # the hint tells it apart
    assert "every served agent" in row

    code, out, _err = _simi(capsys, "serve", "keys", "list", "--json")
    (listed,) = json.loads(out)
    assert code == 0 and listed["name"] == "editor" and listed["agents"] is None
    assert listed["created_at"] and key not in out

    code, out, _err = _simi(capsys, "serve", "keys", "show", "editor")
    assert code == 0 and out.strip() == key

    code, out, err = _simi(capsys, "serve", "keys", "add", "Editor")
    assert code == 1 and out == "" and "already a key" in err

    code, _out, err = _simi(capsys, "serve", "keys", "revoke", "editor")
    assert code == 0 and "revoked" in err
    code, _out, err = _simi(capsys, "serve", "keys", "revoke", "editor")
    assert code == 1 and "no key called" in err

    # revoked: refused at once (a spare key keeps the server's keys-required start possible)
    _simi(capsys, "serve", "keys", "add", "spare")
    assert asyncio.run(_calls(services, key))[1] == 401
    code, out, _err = _simi(capsys, "serve", "keys", "list", "--json")
    assert [k["name"] for k in json.loads(out)] == ["spare"]


def test_a_key_limited_to_agents_names_them_and_an_unknown_agent_is_an_error(
    services, secret_service_env: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _simi(capsys, "serve", "keys", "add", "narrow", "--agents", "Nobody")
    assert code == 1 and "Nobody" in err and "Traceback" not in err
    code, out, _err = _simi(capsys, "serve", "keys", "add", "narrow", "--agents", "SmolLM2 (local)")
    assert code == 0 and out.strip().startswith("simi-")
    code, out, _err = _simi(capsys, "serve", "keys", "list", "--json")
    assert json.loads(out)[0]["agents"] == ["SmolLM2 (local)"]


def test_serve_models_lists_the_model_ids(services, capsys) -> None:
    code, out, _err = _simi(capsys, "serve", "models", "--json")
    assert code == 0
    assert {"id": "smollm2-local", "agent": "SmolLM2 (local)", "local": True} in json.loads(out)


def test_simi_serve_serves_logs_each_request_and_stops_on_ctrl_c(services, cli_env: dict) -> None:
    """``simi serve`` as a user runs it: it prints the address and the models, answers, logs
    one line per request on stderr, and ends cleanly on SIGINT."""
    import signal
    import subprocess
    import sys

    import httpx

    from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
    from tests.helpers.servers import free_port
    from tests.serve.support import remote

    port = free_port()
    with FaultServer(lambda _r: Reply(body=ticking_tokens(2))) as upstream:
        remote(services, upstream.url + "/v1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "desktop", "serve", "--port", str(port)],
            cwd=cli.ROOT,
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = proc.stdout.readline()
            assert first == f"Serving on http://127.0.0.1:{port}/v1\n", proc.stderr.read()
            listed = [proc.stdout.readline().split()[0] for _ in range(2)]
            assert sorted(listed) == ["remote", "smollm2-local"]
            reply = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions", json=chat_body("remote"), timeout=30
            )
            refused = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions", json=chat_body("nope"), timeout=30
            )
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                _out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
    assert refused.status_code == 404
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    done = [line for line in err.splitlines() if " 200 done remote " in line]
    assert len(done) == 1 and "(no key)" in done[0] and "2 tokens" in done[0]
    assert any(" 404 refused nope " in line for line in err.splitlines())


def test_simi_serve_beyond_loopback_without_a_key_is_refused(
    services, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _simi(capsys, "serve", "--host", "0.0.0.0", "--port", "0")
    assert code == 1 and "Serving on" not in out
    assert "key" in err and "Traceback" not in err
