"""A scriptable HTTP/1.1 server on loopback, for replays and fault injection.

Stands in for the remote provider endpoints tests cannot reach (api.openai.com,
api.anthropic.com, generativelanguage.googleapis.com, OpenRouter, a llama.cpp C++ server) and
for any endpoint that must misbehave on purpose: error statuses, stalls, dropped connections,
malformed streams, untrusted TLS certificates, clients that go away. It replays bytes exactly as
given (fixtures in ``tests/data``), records every request it received (method, path, headers,
body) and notices when a client disconnects while it is still sending or waiting.

Each connection serves one request (``Connection: close``), in its own thread; with
``keep_alive=True`` a connection serves requests until the client closes it, as real servers do,
and ``connections`` counts the connections accepted (a reused one is not counted again). Nothing
here is asyncio, so it never shares the event loop of the client under test.
"""

from __future__ import annotations

import contextlib
import datetime
import http
import ipaddress
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

DATA = Path(__file__).resolve().parent.parent / "data"


@dataclass
class Reply:
    """What to answer. ``body``: bytes, or an iterable of chunks sent one by one (may be
    endless). ``after``: ``end`` finishes the response properly; ``drop`` closes the socket
    without finishing the body; ``stall`` goes silent until the client leaves. ``raw``: send
    these bytes instead of an HTTP response, then close."""

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    chunk_delay_s: float = 0.0
    after: Literal["end", "drop", "stall"] = "end"
    chunked: bool = True
    raw: bytes | None = None


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Recorded], Reply]


def sse_chunks(data: bytes) -> list[bytes]:
    """Split an SSE byte stream after each event (blank line), keeping every byte as is."""
    chunks: list[bytes] = []
    start = 0
    while start < len(data):
        ends = [i for i in (data.find(b"\n\n", start), data.find(b"\r\n\r\n", start)) if i >= 0]
        if not ends:
            chunks.append(data[start:])
            break
        end = min(ends)
        end += 4 if data.startswith(b"\r\n\r\n", end) else 2
        chunks.append(data[start:end])
        start = end
    return chunks


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def replay(name: str, **kwargs: Any) -> Reply:
    """A 200 reply that sends a fixture file event by event, byte for byte."""
    data = fixture(name)
    if name.endswith(".json"):
        kwargs.setdefault("content_type", "application/json")
        return Reply(body=data, **kwargs)
    return Reply(body=sse_chunks(data), **kwargs)


def error_reply(status: int, body: object, **headers: str) -> Reply:
    text = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(status=status, body=text, content_type="application/json", headers=headers)


class FaultServer:
    """``handler``: a Reply for every request, a function of the request, or a list of Replies
    used in turn (the last one repeats). ``tls``: a server-side SSL context for https."""

    def __init__(
        self,
        handler: Reply | Handler | list[Reply],
        *,
        tls: ssl.SSLContext | None = None,
        keep_alive: bool = False,
    ) -> None:
        self._handler = handler
        self._tls = tls
        self._keep_alive = keep_alive
        self.connections = 0  # connections accepted so far
        self._count = 0
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._accept.join(timeout=5)
        self._sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    # serving ---------------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            thread = threading.Thread(target=self._connection, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _reply_for(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            index = self._count
            self._count += 1
        handler = self._handler
        if isinstance(handler, Reply):
            return handler
        if isinstance(handler, list):
            return handler[min(index, len(handler) - 1)]
        return handler(request)

    def _connection(self, conn: socket.socket) -> None:
        try:
            if self._tls is not None:
                conn.settimeout(5)
                conn = self._tls.wrap_socket(conn, server_side=True)
            conn.settimeout(5)
            while True:
                request = _read_request(conn)
                if request is None:
                    return
                reply = self._reply_for(request)
                if not self._send(conn, reply) or not self._next_request(conn):
                    return
        except (OSError, ssl.SSLError):
            self.disconnected.set()
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _keeps(self, reply: Reply) -> bool:
        """Whether the connection stays open after ``reply`` (keep-alive and a delimited body)."""
        delimited = reply.chunked or isinstance(reply.body, bytes)
        return self._keep_alive and reply.raw is None and reply.after == "end" and delimited

    def _next_request(self, conn: socket.socket) -> bool:
        """Wait for the client's next request on a kept connection: True when it sends one."""
        while not self._stop.is_set():
            readable, _, _ = select.select([conn], [], [], 0.05)
            if readable or (isinstance(conn, ssl.SSLSocket) and conn.pending()):
                return True
        return False

    def _send(self, conn: socket.socket, reply: Reply) -> bool:
        """Send ``reply``; True when the connection may serve another request."""
        if reply.raw is not None:
            conn.sendall(reply.raw)
            return False
        chunks: Iterable[bytes] = [reply.body] if isinstance(reply.body, bytes) else reply.body
        head = [f"HTTP/1.1 {reply.status} {_reason(reply.status)}"]
        head.append(f"Content-Type: {reply.content_type}")
        if not self._keeps(reply):
            head.append("Connection: close")
        if reply.chunked:
            head.append("Transfer-Encoding: chunked")
        elif isinstance(reply.body, bytes) and reply.after == "end":
            head.append(f"Content-Length: {len(reply.body)}")
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        for chunk in chunks:
            if self._stop.is_set():
                return False
            if not chunk:
                continue
            if reply.chunked:
                chunk = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
            conn.sendall(chunk)
            if reply.chunk_delay_s and self._client_left(conn, reply.chunk_delay_s):
                self.disconnected.set()
                return False
        if reply.after == "drop":
            conn.shutdown(socket.SHUT_RDWR)
            return False
        if reply.after == "stall":
            while not self._stop.is_set():
                if self._client_left(conn, 0.05):
                    self.disconnected.set()
                    return False
            return False
        if reply.chunked:
            conn.sendall(b"0\r\n\r\n")
        return self._keeps(reply)

    @staticmethod
    def _client_left(conn: socket.socket, wait_s: float) -> bool:
        """Wait up to ``wait_s``; True when the client closed its end meanwhile."""
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([conn], [], [], left)
            if readable:
                try:
                    data = conn.recv(4096)
                except (OSError, ssl.SSLError):
                    return True
                if not data:
                    return True
        return False


def _read_request(conn: socket.socket) -> Recorded | None:
    data = b""
    while b"\r\n\r\n" not in data:
        part = conn.recv(65536)
        if not part:
            return None
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        part = conn.recv(65536)
        if not part:
            break
        body += part
    return Recorded(method, path, headers, body)


def _reason(status: int) -> str:
    with contextlib.suppress(ValueError):
        return http.HTTPStatus(status).phrase
    return {529: "Overloaded"}.get(status, "Status")


def ticking_tokens(count: int | None = None, text: str = "tok") -> Iterator[bytes]:
    """OpenAI-style content chunks, endless when ``count`` is None (for cancel tests)."""
    n = 0
    while count is None or n < count:
        chunk = {"choices": [{"index": 0, "delta": {"content": f"{text}{n} "}}]}
        yield f"data: {json.dumps(chunk)}\n\n".encode()
        n += 1
    yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


@dataclass(frozen=True)
class TlsFiles:
    """A private CA and a loopback certificate it signed (for 127.0.0.1)."""

    ca_pem: Path
    cert_pem: Path
    key_pem: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_pem, self.key_pem)
        return ctx


def make_tls_files(directory: Path) -> TlsFiles:
    """Create a throwaway CA and a server certificate for 127.0.0.1 in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "SIMI test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    files.ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files
