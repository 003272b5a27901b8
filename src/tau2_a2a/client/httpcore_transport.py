"""An httpx transport over an httpcore connection pool of the caller's making, on public API only.

httpx's HTTPTransport builds its pool itself, and offers no way to give that
pool a network backend; the pinned connections need one (transport.py). This
is what HTTPTransport does once the pool is given: httpx's request becomes
httpcore's, and httpcore's reply and errors become httpx's, mapped as
HTTPTransport maps them (httpx/_transports/default.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import httpcore
import httpx

# Each httpcore error and the httpx error it becomes; a subclass maps to its own, more specific, error.
ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}


def httpx_error(error: Exception) -> type[httpx.TransportError] | None:
    """The httpx error an httpcore error becomes (the most specific one); None for any other error."""
    mapped: type[httpx.TransportError] | None = None
    for source, target in ERRORS.items():
        if isinstance(error, source) and (mapped is None or issubclass(target, mapped)):
            mapped = target
    return mapped


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as error:
        mapped = httpx_error(error)
        if mapped is None:
            raise  # not httpcore's (the policy's refusal, an abort): passed on as it is
        raise mapped(str(error)) from error


class _ReplyStream(httpx.SyncByteStream):
    """httpcore's reply body, its errors as httpx's."""

    def __init__(self, inner: Iterable[bytes]) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._inner

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class HttpcoreTransport(httpx.BaseTransport):
    """httpx's synchronous transport over `pool`, which it owns (closing the transport closes the pool)."""

    def __init__(self, pool: httpcore.ConnectionPool) -> None:
        self.pool = pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.SyncByteStream):
            raise TypeError("HttpcoreTransport sends synchronous request bodies only")
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                             target=request.url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            reply = self.pool.handle_request(sent)
        if not isinstance(reply.stream, Iterable):
            raise TypeError("httpcore's synchronous pool answered with an asynchronous body")
        return httpx.Response(status_code=reply.status, headers=reply.headers, stream=_ReplyStream(reply.stream),
                              extensions=reply.extensions)

    def close(self) -> None:
        self.pool.close()
