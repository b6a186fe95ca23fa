"""``HubClient``: the Hugging Face Hub's HTTP API, the calls the app uses (contract; see the
package doc). Errors are ``HubError`` subclasses with finished text for the person."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from desktop.errors import UserError
from desktop.hub.names import repo_id
from desktop.settings.secrets import SECRETS_SEEN, redact
from desktop.settings.version import app_version

if TYPE_CHECKING:  # httpx loads with the first client: the Models page opens without it
    import httpx

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
        self.endpoint = (endpoint or hub_endpoint()).rstrip("/")
        self._token = token or None
        if self._token:
            SECRETS_SEEN.add(self._token)
        import httpx

        from desktop.hub.token_auth import HubToken

        headers = {"User-Agent": f"simi-multi/{app_version()}"}
        # The token goes only to the hub's own origin (scheme, host, port): a request to any
        # other (a pagination link elsewhere) is sent without it, and httpx drops it when a
        # redirect leaves the origin (the hub's CDN links are signed URLs).
        auth = HubToken(self._token, self.endpoint) if self._token else None
        self._http = httpx.Client(
            headers=headers,
            auth=auth,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=True,
        )

    @property
    def has_token(self) -> bool:
        return self._token is not None

    # -- the API ---------------------------------------------------------------------------
    def search(self, query: str, *, limit: int = 40) -> list[RepoSummary]:
        """GGUF repositories matching ``query``, most downloaded first."""
        params = {
            "search": query.strip(),
            "filter": "gguf",
            "sort": "downloads",
            "direction": "-1",
            "limit": str(limit),
            "full": "true",
        }
        data = self._get_json(f"{self.endpoint}/api/models", params, what="the search")
        if not isinstance(data, list):
            raise self._garbage("the search")
        out: list[RepoSummary] = []
        for item in data:
            summary = _summary(item)
            if summary is not None:
                out.append(summary)
        return out

    def files(self, repo: str, revision: str = "main") -> list[RepoFile]:
        """Every file of ``repo`` with size and sha256 (callers filter GGUF)."""
        url: str | None = (
            f"{self.endpoint}/api/models/{_quote_repo(repo)}/tree/{quote(revision, safe='')}"
        )
        params: dict[str, str] | None = {"recursive": "true"}
        out: list[RepoFile] = []
        pages = 0
        while url is not None and pages < 100:
            response = self._request("GET", url, params=params, what=f"the files of {repo}")
            data = self._json_of(response, f"the files of {repo}")
            if not isinstance(data, list):
                raise self._garbage(f"the files of {repo}")
            for entry in data:
                file = _repo_file(entry)
                if file is not None:
                    out.append(file)
            url = _next_link(response)
            params = None  # the next link carries the query
            pages += 1
        return out

    def file_url(self, repo: str, path: str, revision: str = "main") -> str:
        """``{endpoint}/{repo}/resolve/{revision}/{path}`` (quoted)."""
        return (
            f"{self.endpoint}/{_quote_repo(repo)}/resolve/{quote(revision, safe='')}/"
            f"{quote(path, safe='/')}"
        )

    def read_range(
        self, repo: str, path: str, start: int, end: int, revision: str = "main"
    ) -> bytes:
        """Bytes ``start``..``end`` (inclusive) of a file, by an HTTP Range request."""
        url = self.file_url(repo, path, revision)
        response = self._request(
            "GET", url, headers={"Range": f"bytes={start}-{end}"}, what=f"{path} of {repo}"
        )
        body = response.content
        if response.status_code == 200:  # the server ignored the Range
            return body[start : end + 1]
        return body[: end - start + 1]

    @contextmanager
    def open_stream(
        self, repo: str, path: str, start: int = 0, revision: str = "main"
    ) -> Iterator[httpx.Response]:
        """A streamed GET of a file from byte ``start`` (a Range request when > 0); the
        response's status is checked (2xx) before it is yielded."""
        import httpx

        url = self.file_url(repo, path, revision)
        headers = {"Range": f"bytes={start}-"} if start > 0 else {}
        what = f"{path} of {repo}"
        try:
            with self._http.stream("GET", url, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise self._status_error(response, what)
                yield response
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, what) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors ----------------------------------------------------------------------------
    def transport_error(self, exc: httpx.HTTPError, what: str) -> HubError:
        import httpx

        host = _host(self.endpoint)
        if isinstance(exc, httpx.TimeoutException):
            text = f"The hub at {host} did not answer in time while fetching {what}. Try again."
        elif isinstance(exc, httpx.ConnectError):
            text = (
                f"Cannot reach the hub at {host}: {_reason(exc)}. Check the network "
                "(or HF_ENDPOINT), then try again."
            )
        elif isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            text = f"The connection to the hub at {host} was cut while fetching {what}."
        else:
            text = f"The hub at {host} could not be used for {what}: {_reason(exc)}."
        return HubUnavailable(redact(text))

    def _status_error(self, response: httpx.Response, what: str) -> HubError:
        status = response.status_code
        code = response.headers.get("x-error-code", "")
        if code in ("RepoNotFound", "RevisionNotFound", "EntryNotFound") or status == 404:
            hint = "" if self._token else " (or it is private: add an access token)"
            return HubNotFound(f"The hub has no {what} ({status}): check the name{hint}.")
        if status in (401, 403):
            if self._token:
                return HubAuthError(
                    "The access token was refused: check it on huggingface.co (Settings → "
                    "Access Tokens) and that you accepted this repository's terms."
                )
            return HubAuthError(
                "This repository is gated or private: accept its terms on huggingface.co, "
                "then add an access token (Models → Find models → Access token)."
            )
        if status == 429:
            return HubUnavailable(
                f"The hub at {_host(self.endpoint)} asks to slow down (429): wait a minute and "
                "try again."
            )
        detail = _server_message(response)
        suffix = f": {detail}" if detail else ""
        return HubUnavailable(
            redact(f"The hub at {_host(self.endpoint)} answered {status} for {what}{suffix}.")
        )

    def _garbage(self, what: str) -> HubUnavailable:
        return HubUnavailable(
            f"The hub at {_host(self.endpoint)} sent something that is not the expected answer "
            f"for {what} (is HF_ENDPOINT a hub?)."
        )

    # -- plumbing --------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        what: str,
    ) -> httpx.Response:
        import httpx

        try:
            response = self._http.request(method, url, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, what) from None
        if response.status_code >= 400:
            raise self._status_error(response, what)
        return response

    def _json_of(self, response: httpx.Response, what: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise self._garbage(what) from None

    def _get_json(self, url: str, params: dict[str, str], what: str) -> Any:
        return self._json_of(self._request("GET", url, params=params, what=what), what)


def _host(endpoint: str) -> str:
    import httpx

    return httpx.URL(endpoint).host or endpoint


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return redact(text.splitlines()[0][:200])


def _server_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])[:200]
    return ""


def _quote_repo(repo: str) -> str:
    """``repo`` checked (``BadName``, a ``UserError``, before anything is sent) and quoted."""
    return quote(repo_id(repo), safe="/")


def _next_link(response: httpx.Response) -> str | None:
    link = response.headers.get("link")
    if not link:
        return None
    for part in link.split(","):
        m = re.match(r'\s*<([^>]+)>\s*;\s*rel="?next"?', part)
        if m:
            return m.group(1)
    return None


def _license_of(item: dict[str, Any]) -> str | None:
    for tag in item.get("tags") or ():
        if isinstance(tag, str) and tag.startswith("license:"):
            return tag.split(":", 1)[1] or None
    card = item.get("cardData")
    if isinstance(card, dict):
        lic = card.get("license")
        if isinstance(lic, str) and lic:
            return lic
        if isinstance(lic, list) and lic and isinstance(lic[0], str):
            return lic[0]
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _summary(item: Any) -> RepoSummary | None:
    if not isinstance(item, dict):
        return None
    repo_id = item.get("id") or item.get("modelId")
    if not isinstance(repo_id, str) or not repo_id:
        return None
    author = item.get("author")
    if not isinstance(author, str) or not author:
        author = repo_id.split("/", 1)[0] if "/" in repo_id else ""
    modified = item.get("lastModified")
    gated = item.get("gated")
    return RepoSummary(
        id=repo_id,
        author=author,
        downloads=_int(item.get("downloads")),
        likes=_int(item.get("likes")),
        license=_license_of(item),
        last_modified=modified if isinstance(modified, str) else None,
        gated=bool(gated) and gated != "false",
        private=item.get("private") is True,
    )


def _repo_file(entry: Any) -> RepoFile | None:
    if not isinstance(entry, dict) or entry.get("type") != "file":
        return None
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        return None
    lfs = entry.get("lfs")
    sha: str | None = None
    size = _int(entry.get("size"))
    if isinstance(lfs, dict):
        oid = lfs.get("oid")
        if isinstance(oid, str) and re.fullmatch(r"(sha256:)?[0-9a-fA-F]{64}", oid):
            sha = oid.removeprefix("sha256:").lower()
        size = _int(lfs.get("size")) or size
    return RepoFile(path=path, size=size, sha256=sha)
