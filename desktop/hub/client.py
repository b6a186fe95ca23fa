"""``HubClient``: the Hugging Face Hub's HTTP API, the calls the app uses (contract; see the
package doc). Errors are ``HubError`` subclasses with finished text for the person."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from desktop.errors import UserError

DEFAULT_ENDPOINT = "https://huggingface.co"
TOKEN_REF = "huggingface-hub"  # the keyring entry (SecretStore key_ref) holding the access token


def hub_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """``HF_ENDPOINT`` when set (no trailing slash), else the public hub."""
    env = os.environ if environ is None else environ
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


class HubError(UserError):
    """The hub could not do what was asked; the message says why and what to do."""


class HubAuthError(HubError):
    """401/403: a gated or private repository, or a token that is wrong."""


class HubNotFound(HubError):
    """404: no such repository, file or revision."""


class HubUnavailable(HubError):
    """The hub cannot be reached, timed out, or answered 5xx / garbage."""


@dataclass(frozen=True, slots=True)
class RepoSummary:
    id: str  # "owner/name"
    author: str
    downloads: int
    likes: int
    license: str | None
    last_modified: str | None  # ISO 8601 as the hub gives it
    gated: bool
    private: bool = False


@dataclass(frozen=True, slots=True)
class RepoFile:
    path: str  # path inside the repository ("Q4_K_M/model-00001-of-00002.gguf")
    size: int
    sha256: str | None  # the LFS oid; None for a file not stored in LFS


class HubClient:
    """One hub endpoint, one token (or none). Sync httpx; call it off the GUI thread."""

    def __init__(
        self,
        endpoint: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        raise NotImplementedError

    def search(self, query: str, *, limit: int = 40) -> list[RepoSummary]:
        """GGUF repositories matching ``query``, most downloaded first."""
        raise NotImplementedError

    def files(self, repo: str, revision: str = "main") -> list[RepoFile]:
        """Every file of ``repo`` with size and sha256 (callers filter GGUF)."""
        raise NotImplementedError

    def file_url(self, repo: str, path: str, revision: str = "main") -> str:
        """``{endpoint}/{repo}/resolve/{revision}/{path}`` (quoted)."""
        raise NotImplementedError

    def read_range(
        self, repo: str, path: str, start: int, end: int, revision: str = "main"
    ) -> bytes:
        """Bytes ``start``..``end`` (inclusive) of a file, by an HTTP Range request."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
