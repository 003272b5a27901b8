"""A TCP relay that stands in for an agent's host, and can crash like one."""

from __future__ import annotations

import asyncio
import threading

from tau2_a2a.protocol.hosting import free_port


class KillableProxy:
    """A TCP relay on loopback in front of an agent; `kill()` drops every connection
    and stops listening, as when the agent's host dies."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy:{self.port}", daemon=True)

    def start(self, target_port: int) -> KillableProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(target_port), self._loop).result(timeout=10)
        return self

    async def _listen(self, target_port: int) -> None:
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def accept(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target_port)
            self._writers.update((client_writer, upstream_writer))
            await asyncio.gather(relay(client_reader, upstream_writer), relay(upstream_reader, client_writer))

        self._server = await asyncio.start_server(accept, "127.0.0.1", self.port)

    def kill(self) -> None:
        """Stop listening and reset every open connection; returns once done."""

        async def die() -> None:
            assert self._server is not None
            self._server.close()
            for writer in self._writers:
                writer.transport.abort()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(die(), self._loop).result(timeout=10)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
