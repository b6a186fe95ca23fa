"""What the agentic loop adds to a tool call: the MCP SDK's own round trip against ours.

    .venv/bin/python bench/tool_calls.py [--calls 200]

Prints one JSON object. Against the SDK test server (``tests/helpers/mcp_server.py``, stdio),
started once:

* ``sdk_call_ms_p50``: ``ClientSession.call_tool("add")`` alone, on the session the manager
  holds (the reference: the protocol's own cost);
* ``manager_call_ms_p50``: ``McpManager.call`` (a ping first, so a dead server is noticed,
  then the call, its result as text);
* ``loop_call_ms_p50``: ``ToolRunner.run_calls`` for one granted call (the argument check,
  the grant lookup, the step stored three times in SQLite, the call);
* ``loop_overhead_ms`` = loop − SDK (p50s) and ``loop_ratio`` = loop / SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from desktop.chat.tool_loop import ToolBox, ToolRunner, model_names  # noqa: E402
from desktop.llm.events import ToolCall  # noqa: E402
from desktop.settings.secrets import SecretStore  # noqa: E402
from desktop.store.agents import Agent, AgentStore  # noqa: E402
from desktop.store.conversations import ConversationStore  # noqa: E402
from desktop.store.db import open_database  # noqa: E402
from desktop.store.tool_steps import ToolStepStore  # noqa: E402
from desktop.store.tools import McpServer, ToolStore  # noqa: E402
from desktop.tools.config import McpConfig  # noqa: E402
from desktop.tools.manager import McpManager  # noqa: E402


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 3)


async def measure(calls: int) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="simi-bench-tools-"))
    db = open_database(folder / "simi.db")
    store = ToolStore(db)
    config = McpConfig(store, SecretStore())
    server = McpServer(
        name="tools",
        command=sys.executable,
        args=("-m", "tests.helpers.mcp_server", "--stdio"),
        cwd=str(ROOT),
    )
    config.add(server)
    agent = AgentStore(db).insert(Agent(name="Bench", kind="openai", model="m"))
    assert agent.id is not None
    store.set_agent_tools(agent.id, [("tools", "add")])
    store.add_grant(agent.id, "tools", "add")
    conversations = ConversationStore(db)
    conv = conversations.create(agent.id)
    message = conversations.add_message(conv.id, "assistant", "", status="streaming").id
    manager = McpManager(config)
    runner = ToolRunner(manager, store, ToolStepStore(db))
    try:
        tools = await manager.tools("tools")
        box = ToolBox(by_name=model_names([t for t in tools if t.name == "add"]))
        session = await (await manager.connection("tools")).session()
        sdk, managed, looped = [], [], []
        for i in range(calls):
            t = time.perf_counter()
            await session.call_tool("add", {"a": i, "b": 1})
            sdk.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await manager.call("tools", "add", {"a": i, "b": 1})
            managed.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await runner.run_calls(
                agent,
                box,
                [ToolCall(f"c{i}", "add", json.dumps({"a": i, "b": 1}))],
                message_id=message,
                call_index=1,
                first_position=i,
                text_offset=0,
                approve=None,
                emit=lambda _e: None,
            )
            looped.append((time.perf_counter() - t) * 1000)
    finally:
        await manager.aclose()
        db.conn.close()
    return {
        "calls": calls,
        "sdk_call_ms_p50": p50(sdk),
        "manager_call_ms_p50": p50(managed),
        "loop_call_ms_p50": p50(looped),
        "loop_overhead_ms": round(p50(looped) - p50(sdk), 3),
        "loop_ratio": round(p50(looped) / p50(sdk), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.calls)), indent=2))


if __name__ == "__main__":
    main()
