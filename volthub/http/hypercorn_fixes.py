"""Every change volthub makes to Hypercorn, each for an upstream behaviour named here.

They are applied once per process by `install`, which `create_app` calls, so they hold under
`volthub serve` and under `hypercorn --worker-class trio "volthub.http.app:create_app()"`
alike. They are pinned to the Hypercorn releases they were written against
(`PATCHED_HYPERCORN_VERSIONS`); on any other release none is applied and a warning says so
(tests/http/test_connections.py fails then, showing whether upstream still needs them).

1. **The close is lost when the request's task is cancelled** (Hypercorn 0.17/0.18; upstream
   issue "Connection:close ignored?"). The connection close runs inside the task that
   finished the response, and Quart-Trio cancels that task's nursery as soon as the request
   is over (it sees `http.disconnect`), so the close (`send_eof` / `aclose`) and the restart
   of the keep-alive idle timer hit a cancelled scope and never happen: `Connection: close`
   and HTTP/1.0 connections are never closed, idle keep-alive connections never time out, a
   response sent before its request body was read leaves the connection in limbo, and
   SIGTERM waits out its whole graceful timeout. `TCPServer.protocol_send` now handles
   `Closed` and `Updated` under a shielded cancel scope with a short deadline
   (`CLOSE_DEADLINE_SECONDS`), so they complete and can never block shutdown.
2. **A closed peer's descriptor is held for the idle timeout**: when the peer closes,
   upstream keeps the connection's task group waiting for `keep_alive_timeout`; the idle
   timer is now stopped at once (`TCPServer._read_data`).
3. **Errors Hypercorn answers itself have an empty body** (400 for an unparsable request,
   431 for an oversized head): they get the `{error, message}` body, metrics and one access
   line, like every other answer (`H11Protocol._send_error_response`).
4. **Both `Content-Length` and `Transfer-Encoding`**: h11, and so Hypercorn, goes by
   `Transfer-Encoding` and keeps the connection open, so the next request on it is served.
   RFC 9112 section 6.1 lets a server refuse such a request or serve it by its
   `Transfer-Encoding`, and requires the connection to be closed either way. Refusing is the
   safer choice: an intermediary that framed the message by its `Content-Length` disagrees
   with us about where the next request starts (request smuggling), and no well-behaved
   client sends both. `H11Protocol._create_stream` answers it 400 with `Connection: close`
   before it reaches the app; the gateway applies the same rule
   (`serving.ambiguous_length`).
5. **Endless WebSocket continuation frames**: upstream's `WebsocketBuffer` bounds a
   message's bytes only, so endless empty continuation frames were read; a message past
   `[events] max_message_frames` frames is refused (1009).
6. **A refused WebSocket frame is dropped without a close frame**: wsproto reports a frame
   it cannot accept (a close code nobody may send, say) as a `CloseConnection` while the
   connection is still open, which Hypercorn takes for nothing to answer, and drops the TCP
   connection. It now answers with a close frame carrying wsproto's code (1002).
7. **No connection cap**: past `[server] max_connections` in total, or
   `max_connections_per_address` from one address, a new connection gets a 503 and is closed
   at once (`TCPServer.run`, counting in `serving.LIMITS`), instead of the process running
   out of file descriptors (`accept returned EMFILE`), after which nobody gets in.
8. **The `hypercorn` command's shutdown cannot be hooked**: its worker polls a shared event
   through `check_multiprocess_shutdown_event`; the app's server wraps it so that its own
   ordered stop runs there too (`stop_first_under_the_hypercorn_command`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import orjson
import trio

from volthub.http.serving import AMBIGUOUS_LENGTH, LIMITS, OVER_CAPACITY_RESPONSE, ambiguous_length

log = logging.getLogger("volthub.serving")

# Hypercorn releases whose trio TCPServer has the cancelled-close bug fixed here.
PATCHED_HYPERCORN_VERSIONS = ("0.17.3", "0.18.0")
# The shielded close gets this long (a TLS close_notify to a peer that never reads could
# otherwise hold it open).
CLOSE_DEADLINE_SECONDS = 2.0

_installed = False


def hypercorn_version() -> str:
    try:
        return version("hypercorn")
    except PackageNotFoundError:  # pragma: no cover - hypercorn is a dependency
        return "unknown"


def install(settings: Any) -> bool:
    """Apply every change once per process, with `settings`' limits; False (and a warning)
    when the installed Hypercorn is not one they were written for."""
    WEBSOCKET_LIMITS.max_message_frames = settings.events.max_message_frames
    PROTOCOL_ERROR_LINES.enabled = settings.logging.access_log
    global _installed
    if _installed:
        return True
    found = hypercorn_version()
    if found not in PATCHED_HYPERCORN_VERSIONS:
        warnings.warn(
            f"volthub's connection-close fix was written for Hypercorn {', '.join(PATCHED_HYPERCORN_VERSIONS)}"
            f" and is NOT applied to {found}: check tests/http/test_connections.py",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    from hypercorn.protocol import ws_stream
    from hypercorn.protocol.h11 import H11Protocol
    from hypercorn.protocol.ws_stream import WebsocketBuffer
    from hypercorn.trio.tcp_server import TCPServer

    TCPServer.protocol_send = _shielded(TCPServer.protocol_send)  # type: ignore[method-assign, assignment]
    TCPServer.run = _capped(TCPServer.run)  # type: ignore[method-assign, assignment]
    TCPServer._read_data = _then_stop_idle_timer(TCPServer._read_data)  # type: ignore[method-assign, assignment]
    H11Protocol._send_error_response = _json_error_response  # type: ignore[method-assign]
    H11Protocol._create_stream = _unambiguous_only(H11Protocol._create_stream)  # type: ignore[method-assign, assignment]
    WebsocketBuffer.extend = _frame_counted(WebsocketBuffer.extend)  # type: ignore[method-assign, assignment]
    ws_stream.Connection = _connection_answering_failures(ws_stream.Connection)  # type: ignore[attr-defined]
    _installed = True
    return True


def _shielded(
    protocol_send: Callable[[Any, Any], Coroutine[Any, Any, None]],
) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    from hypercorn.events import Closed, Updated

    async def protocol_send_shielded(self: Any, event: Any) -> None:
        if isinstance(event, Closed | Updated):
            # The close and the idle timer must happen even when the task that finished the
            # response is being cancelled; bounded, so shutdown never waits on a dead peer.
            with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_DEADLINE_SECONDS):
                await protocol_send(self, event)
            return
        await protocol_send(self, event)

    protocol_send_shielded.__wrapped__ = protocol_send  # type: ignore[attr-defined]
    return protocol_send_shielded


def _then_stop_idle_timer(
    read_data: Callable[[Any], Coroutine[Any, Any, None]],
) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def read_data_then_stop_idle_timer(self: Any) -> None:
        await read_data(self)
        # The peer has gone (EOF or error): nothing is left to wait for. Without this the
        # connection's task group waits out the keep-alive idle timer, holding the
        # descriptor for keep_alive_timeout after every client close.
        with trio.CancelScope(shield=True):
            await self.idle_task.stop()

    read_data_then_stop_idle_timer.__wrapped__ = read_data  # type: ignore[attr-defined]
    return read_data_then_stop_idle_timer


@dataclass
class WebSocketLimits:
    """What the patched WebSocket buffer allows (set from `[events]` by `install`)."""

    max_message_frames: int = 128


WEBSOCKET_LIMITS = WebSocketLimits()


@dataclass
class ProtocolErrorLines:
    """Whether the answers Hypercorn writes itself (unparsable or ambiguous requests) get an
    access line, as every other answer does (`[logging] access_log`, set by `install`)."""

    enabled: bool = True


PROTOCOL_ERROR_LINES = ProtocolErrorLines()


def _frame_counted(extend: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    def extend_counting_frames(self: Any, event: Any) -> None:
        from hypercorn.protocol.ws_stream import FrameTooLargeError

        if self.value is None:  # a new message
            self.volthub_frames = 0
        if event.frame_finished:  # wsproto may hand over one frame in several events
            if self.volthub_frames >= WEBSOCKET_LIMITS.max_message_frames:
                raise FrameTooLargeError()
            self.volthub_frames += 1
        extend(self, event)

    extend_counting_frames.__wrapped__ = extend  # type: ignore[attr-defined]
    return extend_counting_frames


def _connection_answering_failures(connection: type[Any]) -> type[Any]:
    from wsproto.connection import ConnectionState
    from wsproto.events import CloseConnection

    class ConnectionAnsweringFailures(connection):  # type: ignore[misc]
        """wsproto's server connection whose parse failures are answered with their close code."""

        def events(self) -> Any:
            for event in super().events():
                if isinstance(event, CloseConnection) and self.state is ConnectionState.OPEN:
                    # A frame wsproto refused (a real close frame moves the state on first):
                    # as the peer closing, so Hypercorn answers with this event's code.
                    self._state = ConnectionState.REMOTE_CLOSING
                yield event

    return ConnectionAnsweringFailures


def _capped(run: Callable[[Any], Coroutine[Any, Any, None]]) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def run_capped(self: Any) -> None:
        address = _peer_address(self.stream)
        if not LIMITS.admit(address):
            LIMITS.refused += 1
            await _refuse(self.stream)
            return
        try:
            await run(self)
        finally:
            LIMITS.release(address)

    run_capped.__wrapped__ = run  # type: ignore[attr-defined]
    return run_capped


# Hypercorn answers requests h11 cannot parse (400, 431 for an oversized head) with an empty
# body; give them the `{error, message}` body like every other error.
_PROTOCOL_ERRORS = {
    400: ("bad_request", "the request could not be parsed as HTTP/1.1"),
    413: ("payload_too_large", "the request is too large"),
    431: ("request_header_fields_too_large", "the request line or headers are too large"),
}


def _unambiguous_only(
    create_stream: Callable[[Any, Any], Coroutine[Any, Any, None]],
) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    async def create_stream_unless_ambiguous(self: Any, request: Any) -> None:
        if ambiguous_length(request.headers):
            from hypercorn.events import Closed

            # No stream: the app never sees it, and the loop reading this connection ends.
            await _send_json_error(self, 400, "bad_request", AMBIGUOUS_LENGTH, request.method.decode("latin-1"))
            await self.send(Closed())
            return
        await create_stream(self, request)

    create_stream_unless_ambiguous.__wrapped__ = create_stream  # type: ignore[attr-defined]
    return create_stream_unless_ambiguous


async def _json_error_response(self: Any, status_code: int) -> None:
    code, message = _PROTOCOL_ERRORS.get(status_code, ("bad_request", "the request could not be handled"))
    await _send_json_error(self, status_code, code, message)


async def _send_json_error(self: Any, status_code: int, code: str, message: str, method: str = "-") -> None:
    """The answer, then its metrics and one access line (the app never saw the request)."""
    import h11

    from volthub.http import observe

    body = orjson.dumps({"error": code, "message": message})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *self.config.response_headers("h11"),
    ]
    await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
    await self._send_h11_event(h11.Data(data=body))
    await self._send_h11_event(h11.EndOfMessage())
    scope = {"method": method, "client": self.client}
    observe.finished(scope, status_code, 0.0, False, observe.new_request_id(), PROTOCOL_ERROR_LINES.enabled)


def _peer_address(stream: Any) -> str:
    sock = getattr(stream, "socket", None) or getattr(getattr(stream, "transport_stream", None), "socket", None)
    try:
        peer = sock.getpeername() if sock is not None else None
    except OSError:
        return "?"
    return str(peer[0]) if isinstance(peer, tuple) else str(peer)


async def _refuse(stream: Any) -> None:
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_DEADLINE_SECONDS):
        try:
            if hasattr(stream, "transport_stream"):  # TLS: no handshake for a refused peer
                await stream.transport_stream.aclose()
                return
            await stream.send_all(OVER_CAPACITY_RESPONSE)
            await stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await stream.aclose()


def stop_first_under_the_hypercorn_command(stop_trigger: Callable[[Callable[..., Awaitable[object]]], Any]) -> None:
    """Under the `hypercorn` command the parent process takes SIGTERM and tells its worker
    through a shared event, which the worker's trio runner polls with
    `check_multiprocess_shutdown_event` (looked up when the runner starts, after it has
    loaded the app). Wrapped by the app's `Server.stop_trigger`, so the server's stop runs
    in its order there too; nothing else calls it."""
    import hypercorn.trio.run as trio_runner
    from hypercorn.utils import check_multiprocess_shutdown_event

    trio_runner.check_multiprocess_shutdown_event = stop_trigger(check_multiprocess_shutdown_event)  # type: ignore[attr-defined]
