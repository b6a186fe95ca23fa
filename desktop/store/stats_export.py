"""Stats as CSV and JSON: the dashboard's Export and ``simi stats --csv|--json``.

``rows_to_csv`` / ``rows_to_json`` write a list of dicts (``StatsStore.export_rows`` for every
call, ``StatsStore.summary`` for the per-agent figures). CSV: one header line of the keys, a
missing value (NULL) as an empty cell, a nested value (``error_kinds``) as compact JSON. JSON:
a list of objects, NULL as ``null``; both UTF-8 text, so they open in a spreadsheet or parse
back as they were. Stats rows hold no secrets (keys live only in the keyring).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO


def rows_to_csv(
    rows: Iterable[Mapping[str, Any]], out: TextIO, columns: Sequence[str] | None = None
) -> None:
    """Write ``rows`` as CSV; the header is ``columns`` (default: the first row's keys)."""
    items = list(rows)
    header = list(columns) if columns is not None else list(items[0]) if items else []
    if not header:
        return
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in items:
        writer.writerow([_cell(row.get(key)) for key in header])


def rows_to_json(rows: Iterable[Mapping[str, Any]], out: TextIO) -> None:
    """Write ``rows`` as one JSON list of objects (indented, ending in a newline)."""
    json.dump([dict(r) for r in rows], out, indent=2, ensure_ascii=False)
    out.write("\n")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return value
