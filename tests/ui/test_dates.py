"""Dates as a person reads them, whatever the machine's time zone and locale: "yesterday" is the
local calendar's yesterday (a reply from 30 hours back at half past midnight is two days ago),
the dashboard's custom range is local days, and month names are the window's language (English),
not the C library's (Qt sets it from LANG: "Dez", "12月")."""

from __future__ import annotations

import locale
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest

from desktop.chat.format import date_text
from desktop.ui.kit.text_format import relative_time
from desktop.ui.stats.dashboard_data import range_bounds, range_words


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Set the process's time zone for one test (``TZ`` + ``tzset``) and put it back."""

    def use(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("tz", ["Asia/Kolkata", "America/Los_Angeles", "UTC"])
def test_yesterday_is_the_local_calendars_yesterday(zone, tz: str) -> None:
    zone(tz)
    # 00:30 local on 3 Dec 2026, whatever the zone
    now = datetime(2026, 12, 3, 0, 30).astimezone()

    def iso(**back: float) -> str:
        return (now - timedelta(**back)).astimezone(UTC).isoformat()

    assert relative_time(iso(minutes=5), now) == "5 min ago"
    assert relative_time(iso(hours=1, minutes=30), now) == "1 h ago"  # 23:00 local: hours
    assert relative_time(iso(hours=20), now) == "yesterday"  # 04:30 on 2 Dec
    assert relative_time(iso(hours=30), now) == "1 Dec"  # 18:30 on 1 Dec: not "yesterday"
    assert relative_time(iso(days=400), now) == "29 Oct 2025"
    # late in the day, a reply from this morning is hours ago, one from last night yesterday
    evening = datetime(2026, 12, 3, 23, 50).astimezone()
    assert relative_time((evening.replace(hour=8)).astimezone(UTC).isoformat(), evening) == (
        "15 h ago"
    )
    last_night = datetime(2026, 12, 2, 22, 0).astimezone().astimezone(UTC).isoformat()
    assert relative_time(last_night, evening) == "yesterday"


@pytest.mark.parametrize("tz", ["Asia/Kolkata", "America/Los_Angeles"])
def test_a_custom_range_is_local_days_in_any_zone(zone, tz: str) -> None:
    zone(tz)
    since, until = range_bounds("custom", datetime.now(UTC), (date(2026, 12, 1), date(2026, 12, 2)))
    assert since is not None and until is not None
    start = datetime.fromisoformat(since).astimezone()
    assert (start.year, start.month, start.day, start.hour, start.minute) == (2026, 12, 1, 0, 0)
    assert range_words(since, until) == "between 1 Dec 2026 and 2 Dec 2026"


def test_month_names_are_english_in_any_locale() -> None:
    # The environment's own locale, as Qt leaves it in the window's process; the test matrix
    # (scripts/test-matrix) runs this under de_DE and ja_JP, where %b is "Dez" / "12月".
    before = locale.setlocale(locale.LC_TIME)
    try:
        locale.setlocale(locale.LC_TIME, "")
        moment = datetime(2026, 12, 3, 9, 5, 7)
        assert date_text(moment, "%-d %b %Y, %H:%M:%S") == "3 Dec 2026, 09:05:07"
        assert date_text(moment, "%d %b") == "03 Dec"
        assert date_text(date(2026, 5, 1), "%b %Y") == "May 2026"
    finally:
        locale.setlocale(locale.LC_TIME, before)
