"""The installed app's version, as the core tells it to other programs (the Hub's User-Agent,
an MCP server's client info): ``desktop.__version__`` is above these layers."""

from __future__ import annotations


def app_version() -> str:
    """The installed distribution's version; "dev" where it is not installed (a checkout)."""
    try:
        from importlib.metadata import version

        return version("simi-multi")
    except Exception:
        return "dev"
