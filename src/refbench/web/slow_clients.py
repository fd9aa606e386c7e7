"""uvicorn's HTTP/1.1 protocol (h11) with a bound on how long a request's line and headers may take to arrive: a
client that connects, or starts a request on a kept-alive connection, and has not sent them whole within HEADERS_S
is disconnected, as nginx's client_header_timeout does. uvicorn bounds only the wait between requests (its
keep-alive timeout), so a half-sent request, or a connection that sends nothing, would hold a connection for ever."""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADERS_S = 10.0


class HeadersInTime(H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._headers_due: asyncio.TimerHandle | None = self.loop.call_later(HEADERS_S, self._headers_late)

    def data_received(self, data: bytes) -> None:
        if self._headers_due is None and self.conn.their_state is h11.IDLE:  # the next request on this connection
            self._headers_due = self.loop.call_later(HEADERS_S, self._headers_late)
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # its headers are in: the application has the request
            self._cancel()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _cancel(self) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _headers_late(self) -> None:
        self._headers_due = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
