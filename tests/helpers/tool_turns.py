"""Set-up shared by the tests of agentic turns: the real MCP test server
(``tests/helpers/mcp_server.py``, stdio, written with the SDK) added to an app folder, and an
OpenAI-compatible agent (pointed at a loopback ``FaultServer`` that streams scripted tool calls,
``tests/helpers/tool_server.py``) allowed some of its tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from desktop.store.agents import Agent
from desktop.store.tools import McpServer
from desktop.tools.config import parse_tool_list

ROOT = Path(__file__).resolve().parents[2]
SERVER_ARGS = ("-m", "tests.helpers.mcp_server", "--stdio")


def add_mcp_server(services: Any, name: str = "tools", **changes: Any) -> McpServer:
    """The SDK test server (tools add, echo, fail, sleep, crash, big, env, pid) over stdio."""
    server = McpServer(name=name, command=sys.executable, args=SERVER_ARGS, cwd=str(ROOT))
    return services.tools.manager.config.add(server.with_changes(**changes))


def tool_agent(services: Any, base_url: str, tools: str = "tools", name: str = "Tooly") -> Agent:
    """An OpenAI-compatible agent at ``base_url`` (…/v1) allowed ``tools`` (``SERVER[:TOOL],…``)."""
    agent = services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=base_url, model="m")
    )
    services.tools.tools.set_agent_tools(agent.id, parse_tool_list(tools))
    return agent
