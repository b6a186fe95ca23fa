"""Tools for agents: MCP servers (issue 18). Qt-free.

- ``config.py``: ``McpServer`` (from ``store/tools.py``) and ``McpConfig``: validation and the
  servers' secrets in the keyring.
- ``manager.py``: ``McpManager``: one connection per server, started on first use, tool lists
  and calls with timeouts, results as text.
- ``errors.py``: ``ToolServerError``, ``ToolTimeout``.
"""
