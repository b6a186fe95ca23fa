"""Agents: the sidebar list and the editor (endpoint, local model, price, tools, the connection
check, the live memory estimate)."""
