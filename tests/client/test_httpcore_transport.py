"""HttpcoreTransport does what httpx's HTTPTransport does over the same pool: these fail when httpx or httpcore
change what it copies (the request and reply mapping, the errors)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import httpcore
import httpx
import pytest

from tau2_a2a.client.httpcore_transport import ERRORS, HttpcoreTransport, httpx_error
from tau2_a2a.protocol.hosting import free_port

# httpcore's pool signals itself with it and retries on another connection; httpx maps it to nothing either.
UNMAPPED = {"ConnectionNotAvailable"}


def test_every_error_httpcore_exports_maps_to_httpx_s_error_of_the_same_name() -> None:
    exported = {name: getattr(httpcore, name) for name in httpcore.__all__ if name not in UNMAPPED}
    errors = {name: cls for name, cls in exported.items() if isinstance(cls, type) and issubclass(cls, Exception)}
    for name, cls in errors.items():
        mapped = httpx_error(cls("x"))
        assert mapped is not None, (f"httpcore now exports {name}, which HttpcoreTransport does not map: add it to "
                                    "httpcore_transport.ERRORS as httpx's HTTPTransport maps it")
        assert mapped is getattr(httpx, name, None), f"httpcore.{name} maps to httpx.{mapped.__name__}"
    assert set(ERRORS) == set(errors.values()), "ERRORS names an error httpcore no longer exports"
    assert httpx_error(ValueError("x")) is None


def test_the_errors_map_as_httpx_s_own_transport_maps_them() -> None:
    from httpx._transports import default

    load = getattr(default, "_load_httpcore_exceptions", None)
    assert load is not None, ("httpx._transports.default._load_httpcore_exceptions is gone: compare "
                              "httpcore_transport.ERRORS with how httpx's HTTPTransport now maps httpcore's errors")
    assert load() == ERRORS


class _Server:
    """A one-thread HTTP server answering each connection with `reply` (raw bytes), then closing it."""

    def __init__(self, reply: bytes) -> None:
        self.port = free_port()
        self._reply = reply
        self._socket = socket.create_server(("127.0.0.1", self.port))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with connection:
                received = b""
                while b"\r\n\r\n" not in received:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    received += chunk
                connection.sendall(self._reply)

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def serve() -> Iterator[Callable[[bytes], _Server]]:
    servers: list[_Server] = []

    def start(reply: bytes) -> _Server:
        servers.append(_Server(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _both() -> dict[str, httpx.BaseTransport]:
    return {"httpx": httpx.HTTPTransport(), "ours": HttpcoreTransport(httpcore.ConnectionPool())}


def test_a_reply_reads_as_through_httpx_s_transport(serve: Callable[[bytes], _Server]) -> None:
    server = serve(b"HTTP/1.1 201 Made\r\nContent-Type: text/plain\r\nX-Two: a\r\nX-Two: b\r\n"
                   b"Content-Length: 5\r\nConnection: close\r\n\r\nhello")
    seen = {}
    for name, transport in _both().items():
        with httpx.Client(transport=transport) as client:
            response = client.post(f"http://127.0.0.1:{server.port}/path?q=1", content=b"body",
                                   timeout=httpx.Timeout(5.0))
            seen[name] = (response.status_code, response.reason_phrase, response.http_version,
                          response.headers.multi_items(), response.content, sorted(response.extensions))
    assert seen["ours"] == seen["httpx"]
    assert seen["ours"][:2] == (201, "Made")


def test_a_reply_cut_short_fails_as_through_httpx_s_transport(serve: Callable[[bytes], _Server]) -> None:
    server = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
    for transport in _both().values():
        with httpx.Client(transport=transport) as client, pytest.raises(httpx.RemoteProtocolError):
            client.get(f"http://127.0.0.1:{server.port}/", timeout=httpx.Timeout(5.0))


def test_a_closed_port_fails_to_connect_as_through_httpx_s_transport() -> None:
    port = free_port()
    for transport in _both().values():
        with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectError):
            client.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(5.0))
