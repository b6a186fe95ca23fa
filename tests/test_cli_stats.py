"""`simi stats`: the summary as a table, JSON or CSV, every call with --rows, and its filters."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from desktop import cli
from desktop.store.stats import EXPORT_COLUMNS, SUMMARY_KEYS
from tests.test_cli import simi


def _call(agent: str, day: int, **fields: Any) -> dict[str, Any]:
    return {
        "agent_name": agent,
        "provider_kind": "openai",
        "started_at": f"2026-11-{day:02d}T12:00:00.000+00:00",
        "finish_reason": "stop",
        **fields,
    }


@pytest.fixture
def history(simi_home) -> None:
    """Three agents' calls in November 2026, recorded as the chat service records them."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    services = Services.open(AppPaths.from_env())
    try:
        record = services.stats.record
        for day in range(1, 21):  # 20 calls: TTFT 10 … 200 ms, decode 1 … 20 tok/s
            record(
                _call(
                    "Cloud",
                    day,
                    ttft_ms=10.0 * day,
                    decode_tok_s=float(day),
                    prompt_tokens=100,
                    cached_tokens=25,
                    output_tokens=10,
                    cost_usd=0.01,
                    price_source="genai-prices",
                )
            )
        record(_call("Cloud", 21, cost_usd=None, price_source=None, ttft_ms=500.0, output_tokens=5))
        record(_call("Cloud", 22, finish_reason="error", error_kind="rate_limited"))
        record(_call("Box", 5, provider_kind="local", ttft_ms=80.0, price_source="local",
                     cost_usd=0.0))  # fmt: skip
        record(_call("Box", 25, provider_kind="local", finish_reason="cancelled",
                     price_source="local", cost_usd=0.0))  # fmt: skip
        record(_call("Mystery", 10, ttft_ms=300.0, output_tokens=7))  # no price known
    finally:
        services.close()


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["stats", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table_shows_percentiles_errors_and_what_is_not_priced(history, capsys) -> None:
    code, out, _ = _main(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["agent", "calls", "cancelled", "errors"]
    assert "TTFT p50" in lines[0] and "decode p95" in lines[0] and "cost" in lines[0]
    cloud = next(line for line in lines if line.startswith("Cloud"))
    # 21 TTFTs (10 … 200 and 500): rank 11 -> 110 ms, rank 20 -> 200 ms
    assert "22" in cloud.split() and "1 (4.5%)" in cloud
    assert "110 ms" in cloud and "200 ms" in cloud
    # the call refused before any token had nothing to price: only one lacks a price
    assert "$0.20 + 1 call without a price" in cloud
    assert "local (free)" in next(line for line in lines if line.startswith("Box"))
    mystery = next(line for line in lines if line.startswith("Mystery"))
    assert "unknown (1 call without a price)" in mystery and "$0" not in mystery
    assert "  Cloud: rate_limited 1" in lines
    assert lines[1].startswith("Cloud")  # most calls first


def test_json_is_the_summary_with_percentiles(history, capsys) -> None:
    code, out, _ = _main(capsys, "--json", "--agent", "cloud", "--until", "2026-11-21")
    assert code == 0
    (cloud,) = json.loads(out)
    assert list(cloud) == list(SUMMARY_KEYS)
    assert cloud["calls"] == 20 and cloud["errors"] == 0
    assert (cloud["ttft_p50_ms"], cloud["ttft_p95_ms"]) == (100.0, 190.0)
    assert (cloud["decode_p50_tok_s"], cloud["decode_p95_tok_s"]) == (10.0, 19.0)
    assert cloud["cost_usd"] == pytest.approx(0.20) and cloud["cached_share"] == 0.25


def test_agent_can_be_given_several_times_and_since_is_inclusive(history, capsys) -> None:
    _, out, _ = _main(capsys, "--json", "--agent", "BOX", "--agent", "Mystery")
    assert sorted(r["agent"] for r in json.loads(out)) == ["Box", "Mystery"]
    _, out, _ = _main(capsys, "--json", "--since", "2026-11-21")
    got = {r["agent"]: r["calls"] for r in json.loads(out)}
    assert got == {"Cloud": 2, "Box": 1}


def test_csv_is_the_summary_with_a_header_of_its_keys(history, capsys) -> None:
    code, out, _ = _main(capsys, "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == list(SUMMARY_KEYS)
    by_agent = {r["agent"]: r for r in rows}
    assert by_agent["Cloud"]["calls"] == "22" and by_agent["Mystery"]["cost_usd"] == ""
    assert json.loads(by_agent["Cloud"]["error_kinds"]) == {"rate_limited": 1}


def test_rows_exports_every_call_as_csv_or_json(history, capsys) -> None:
    code, out, _ = _main(capsys, "--rows", "--csv", "--agent", "Box")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == EXPORT_COLUMNS
    assert [r["finish_reason"] for r in rows] == ["stop", "cancelled"]  # oldest first
    _, out, _ = _main(capsys, "--rows", "--json", "--since", "2026-11-20", "--until", "2026-11-22")
    calls = json.loads(out)
    assert [c["started_at"][:10] for c in calls] == ["2026-11-20", "2026-11-21"]
    assert list(calls[0]) == EXPORT_COLUMNS


def test_rows_without_a_format_is_refused_in_words(history, capsys) -> None:
    code, out, err = _main(capsys, "--rows")
    assert code == 2 and out == ""
    assert "--rows: give --json or --csv too" in err


def test_nothing_to_show_is_said_in_words(history, capsys) -> None:
    code, out, _ = _main(capsys, "--agent", "Nobody", "--since", "2026-01-01")
    assert code == 0 and out.strip() == "No calls for “Nobody” since 2026-01-01."
    _, out, _ = _main(capsys, "--json", "--agent", "Nobody")
    assert json.loads(out) == []


def test_a_bad_date_says_what_is_expected(cli_env) -> None:
    out = simi(cli_env, "stats", "--since", "last week")
    assert out.returncode == 2 and out.stdout == ""
    assert "--since: expected a date like 2026-11-30" in out.stderr
    out = simi(cli_env, "stats", "--until", "2026-02-30", "--json")
    assert out.returncode == 2 and "--until: expected a date like 2026-11-30" in out.stderr


def test_json_and_csv_together_are_refused(cli_env) -> None:
    out = simi(cli_env, "stats", "--json", "--csv")
    assert out.returncode == 2 and "not allowed with argument --json" in out.stderr


def test_tool_calls_and_their_time_are_in_the_table_json_and_csv(simi_home, capsys) -> None:
    """An agentic turn's rows as ``ChatService.run`` records them (the call that asked for
    tools ends "tool_calls" with their count and run time)."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    services = Services.open(AppPaths.from_env())
    try:
        services.stats.record(_call("Plain", 2))
        _, plain, _ = _main(capsys)
        services.stats.record(
            _call("Tooly", 3, finish_reason="tool_calls", call_index=1, tool_calls=1, tool_ms=80.0)
        )
        services.stats.record(_call("Tooly", 3, call_index=2))
    finally:
        services.close()
    assert "tool calls" not in plain  # no tools: the table as before
    _, out, _ = _main(capsys)
    header, *lines = out.splitlines()
    assert "tool calls" in header and "tool time" in header
    tooly = next(line for line in lines if line.startswith("Tooly"))
    assert tooly.split()[1] == "2" and "80 ms" in tooly
    assert "tool time: how long the tools ran" in out
    _, out, _ = _main(capsys, "--json", "--agent", "Tooly")
    (row,) = json.loads(out)
    assert (row["calls"], row["tool_calls"], row["tool_ms"]) == (2, 1, 80.0)
    _, out, _ = _main(capsys, "--csv")
    by_agent = {r["agent"]: r for r in csv.DictReader(io.StringIO(out))}
    assert (by_agent["Tooly"]["tool_calls"], by_agent["Tooly"]["tool_ms"]) == ("1", "80.0")
    assert (by_agent["Plain"]["tool_calls"], by_agent["Plain"]["tool_ms"]) == ("0", "")
