"""A key stored through the app is used for its endpoint and found nowhere else.

The peer is the real OpenAI-compatible server of llama-cpp-python on loopback, started with an
API key, so a missing or wrong Authorization header really fails.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.cli import simi
from tests.helpers.servers import llama_server

pytestmark = pytest.mark.slow

KEY = "sk-simi-leakcheck-4f9a2c7e1b"


def test_key_lives_only_in_the_keyring(cli_env, simi_home, secret_service_env) -> None:
    with llama_server(api_key=KEY) as base_url:
        add = simi(
            cli_env,
            "agents",
            "add",
            "--name",
            "Loopback",
            "--kind",
            "openai-compatible",
            "--base-url",
            base_url,
            "--model",
            "smollm2",
            "--api-key-stdin",
            stdin=KEY + "\n",
        )
        assert add.returncode == 0, add.stderr
        shown = simi(cli_env, "agents", "show", "Loopback", "--json")
        assert json.loads(shown.stdout)["has_api_key"] is True
        ask = simi(cli_env, "ask", "--agent", "Loopback", "--json", "Say hi.")
        assert ask.returncode == 0, ask.stderr  # the server accepted the key
        record = json.loads(ask.stdout.strip().splitlines()[-1])
        assert record["status"] == "complete" and record["endpoint_host"] == "127.0.0.1"
        assert record["ttft_ms"] > 0

        # A wrong key: a clear message naming the server, and no key in it.
        bad = simi(
            cli_env,
            "agents",
            "add",
            "--name",
            "Wrong key",
            "--kind",
            "openai-compatible",
            "--base-url",
            base_url.replace("127.0.0.1", "localhost"),
            "--model",
            "smollm2",
            "--api-key-stdin",
            stdin="sk-wrong-key-0000\n",
        )
        assert bad.returncode == 0
        denied = simi(cli_env, "ask", "--agent", "Wrong key", "Hi")
        assert denied.returncode == 1 and "API key" in denied.stderr
        assert "sk-wrong-key-0000" not in denied.stderr + denied.stdout

    outputs = "".join(o.stdout + o.stderr for o in (add, shown, ask, bad, denied))
    assert KEY not in outputs
    leaked = []
    for root, _dirs, files in os.walk(simi_home):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                if KEY.encode() in fh.read():
                    leaked.append(path)
    assert leaked == []
    assert (simi_home / "simi.db").exists() and (simi_home / "logs" / "simi.log").exists()
