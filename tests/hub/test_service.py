"""HubService as ``services.hub``: the access token in the real OS keyring (Secret Service,
see tests/conftest.py), ``HF_TOKEN`` as a fallback, against the fake hub
(``tests/helpers/fake_hub.py``, standing in for huggingface.co)."""

from __future__ import annotations

import pytest

from desktop.hub.client import TOKEN_REF, HubAuthError
from desktop.local.starter import STARTER_FILE
from tests.helpers.fake_hub import GATED_REPO, FakeHub


def test_token_kept_in_the_keyring_opens_the_gated_repo(
    hub: FakeHub, services: object, secret_service_env: dict[str, str]
) -> None:
    svc = services.hub  # type: ignore[attr-defined]
    assert svc.downloads.models_dir == services.paths.models_dir  # type: ignore[attr-defined]
    assert not svc.has_token()
    with svc.client() as client, pytest.raises(HubAuthError):
        client.read_range(GATED_REPO, STARTER_FILE, 0, 3)
    svc.set_token(f"  {hub.token}  ")
    assert svc.has_token()
    assert services.secrets.get(TOKEN_REF) == hub.token  # type: ignore[attr-defined]
    with svc.client() as client:
        assert client.read_range(GATED_REPO, STARTER_FILE, 0, 3) == b"GGUF"
    svc.set_token(None)
    assert not svc.has_token() and svc.token() is None


def test_hf_token_is_used_when_none_is_saved(
    hub: FakeHub, services: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hub.token
    monkeypatch.setenv("HF_TOKEN", hub.token)
    svc = services.hub  # type: ignore[attr-defined]
    assert not svc.has_token()
    with svc.client() as client:
        assert client.read_range(GATED_REPO, STARTER_FILE, 0, 3) == b"GGUF"


def test_nothing_is_contacted_until_asked(hub: FakeHub, services: object) -> None:
    assert services.hub is not None  # type: ignore[attr-defined]
    assert hub.requests == []
