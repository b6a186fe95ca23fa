"""A conversation export (``desktop.chat.export.to_json``'s shape) of any size, built directly:
for import tests that need thousands of messages."""

from __future__ import annotations

from typing import Any

from desktop.chat.export import FORMAT


def exported(
    title: str, n_messages: int, *, parents_last: bool = False, stats: bool = True
) -> dict[str, Any]:
    """A conversation as ``to_json`` writes it: one branch of ``n_messages``, the replies with
    a stats row (unless ``stats`` is False); ``parents_last`` lists every message before its
    parent."""
    messages = []
    for i in range(1, n_messages + 1):
        reply = i % 2 == 0
        messages.append(
            {
                "id": i,
                "parent_id": i - 1 if i > 1 else None,
                "active_child": i + 1 if i < n_messages else None,
                "role": "assistant" if reply else "user",
                "content": f"{title} message {i}",
                "status": "complete",
                "agent_name": "Archivist" if reply else None,
                "model": "m" if reply else None,
                "stats": {"ttft_ms": 12.5, "output_tokens": 7} if reply and stats else None,
            }
        )
    if parents_last:
        messages.reverse()
    return {
        "format": FORMAT,
        "version": 1,
        "conversation": {"title": title, "pinned": False, "active_root": 1},
        "active_path": list(range(1, n_messages + 1)),
        "messages": messages,
    }
