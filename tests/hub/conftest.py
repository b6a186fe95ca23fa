"""The fake hub (``tests/helpers/fake_hub.py``) stands in for huggingface.co in these tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.fake_hub import FakeHub, fake_hub


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with fake_hub() as h:
        monkeypatch.setenv("HF_ENDPOINT", h.endpoint)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield h
