"""A real Secret Service for tests: a private D-Bus session bus with gnome-keyring on it.

Nothing is faked: keyring talks to gnome-keyring-daemon over D-Bus exactly as on a desktop.
The keyrings live in a temporary XDG_DATA_HOME, never in the user's home.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SecretServiceSession:
    env: dict[str, str]
    bus_pid: int
    keyring_proc: subprocess.Popen[bytes] | None
    data_home: Path

    def stop(self) -> None:
        if self.keyring_proc is not None and self.keyring_proc.poll() is None:
            self.keyring_proc.terminate()
        for pid in _keyring_pids(self.env):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            os.kill(self.bus_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        shutil.rmtree(self.data_home, ignore_errors=True)


def _keyring_pids(env: dict[str, str]) -> list[int]:
    pid = env.get("GNOME_KEYRING_PID")
    return [int(pid)] if pid and pid.isdigit() else []


def available() -> bool:
    return bool(shutil.which("dbus-daemon") and shutil.which("gnome-keyring-daemon"))


def start(password: str = "simi-test") -> SecretServiceSession:
    data_home = Path(tempfile.mkdtemp(prefix="simi-keyring-"))
    runtime = data_home / "runtime"
    runtime.mkdir(mode=0o700)
    out = subprocess.run(
        ["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    address, bus_pid = out[0], int(out[1])
    env = {
        "DBUS_SESSION_BUS_ADDRESS": address,
        "XDG_DATA_HOME": str(data_home),
        "XDG_RUNTIME_DIR": str(runtime),
    }
    full_env = {**os.environ, **env}
    proc = subprocess.run(
        ["gnome-keyring-daemon", "--unlock", "--components=secrets"],
        input=password.encode(),
        env=full_env,
        capture_output=True,
        timeout=20,
    )
    for line in proc.stdout.decode().splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    session = SecretServiceSession(env, bus_pid, None, data_home)
    # Wait until the service answers on the bus.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [
                "dbus-send",
                "--session",
                "--print-reply",
                "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
                "string:org.freedesktop.secrets",
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
        )
        if "true" in probe.stdout:
            break
        time.sleep(0.1)
    return session
