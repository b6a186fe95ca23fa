"""`simi ask` says on stderr what a slow reply waits for, and a stall is not retried in silence.

The server is FaultServer on loopback: it answers with headers, then says nothing (standing in
for a busy GPU box in a long prefill, which no test can reach offline)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Reply


def test_ask_says_on_stderr_what_a_silent_server_keeps_it_waiting_for(cli_env: dict) -> None:
    with FaultServer(Reply(body=b"", after="stall")) as server:
        services = Services.open(AppPaths.from_env(cli_env))
        services.agents.create(
            Agent(name="Busy box", kind="openai-compatible", base_url=server.url + "/v1", model="m")
        )
        services.close()
        proc = subprocess.Popen(
            [sys.executable, "-m", "desktop", "ask", "--agent", "Busy box", "Hello?"],
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(6)  # long enough for the 2 s threshold on a loaded machine
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert "simi: waiting for the first token…" in err, err
    assert "Traceback" not in err
    assert proc.returncode != 0
