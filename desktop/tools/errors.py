"""The errors a person sees from tools (MCP servers), with finished text."""

from __future__ import annotations

from desktop.errors import UserError


class ToolServerError(UserError):
    """An MCP server could not be started, reached or kept running (command not found, exited,
    refused the connection), or answered a call with a protocol error. ``stderr_tail`` holds
    the last lines the server wrote on stderr, when it is a process."""

    kind = "tool_server"

    def __init__(self, user_message: str, stderr_tail: tuple[str, ...] = ()) -> None:
        super().__init__(user_message)
        self.stderr_tail = stderr_tail


class ToolTimeout(ToolServerError):
    """A tool call ran past its server's timeout and was cancelled."""

    kind = "tool_timeout"
