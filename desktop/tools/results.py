"""What the tool layer hands out: tools, server states and call results, and a result as text.

Results are text (``content_text``): ``TextContent`` joined; images, audio and resources
described in brackets (never rendered: the UI shows ``text`` as plain text); structured content
as JSON when there is no block. ``cut`` keeps at most a limit with a note saying so.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["stopped", "starting", "ready", "failed"]


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool of a server as the server describes it; ``input_schema`` is JSON Schema."""

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required") or ())


@dataclass(frozen=True, slots=True)
class ServerState:
    status: Status = "stopped"
    tools: tuple[ToolInfo, ...] = ()
    why: str = ""  # failed: what went wrong, in words
    stderr_tail: tuple[str, ...] = ()  # failed: the last lines the process wrote on stderr

    def describe(self) -> str:
        """One line: "ready, 3 tools", "failed: …"."""
        if self.status == "ready":
            n = len(self.tools)
            return f"ready, {n} tool{'s' if n != 1 else ''}"
        if self.status == "failed":
            return f"failed: {self.why}"
        return self.status


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returned, as text. ``size`` is the length of the whole text in
    characters; ``text`` is cut at the limit (``truncated``) with a note at its end."""

    server: str
    tool: str
    text: str
    is_error: bool
    size: int
    duration_ms: float
    truncated: bool = False


def _b64_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def content_text(result: Any) -> str:
    """A ``CallToolResult`` as plain text: text blocks joined by newlines, anything else
    described in brackets; structured content (JSON) when there are no blocks."""
    import mcp_types as types

    parts: list[str] = []
    for block in result.content or ():
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            what = "image" if isinstance(block, types.ImageContent) else "audio"
            parts.append(f"[{what}: {block.mime_type}, {_b64_size(block.data):,} bytes]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link: {block.name} {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                parts.append(res.text)
            else:
                size = _b64_size(getattr(res, "blob", ""))
                parts.append(f"[resource {res.uri}: {res.mime_type or 'binary'}, {size:,} bytes]")
        else:
            parts.append(f"[{getattr(block, 'type', type(block).__name__)} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    return "\n".join(parts)


def cut(text: str, limit: int, whole: int | None = None) -> tuple[str, bool]:
    """``text`` cut at ``limit`` with a note saying so; ``whole``: the length of the whole
    result when ``text`` is already a part of it."""
    if len(text) <= limit:
        return text, False
    note = (
        f"\n\n[truncated: the tool returned {whole or len(text):,} characters; the first "
        f"{limit:,} are shown]"
    )
    return text[:limit] + note, True
