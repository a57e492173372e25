"""Sessions opened for the Engine.IO session tests, and their assertions."""

from __future__ import annotations

from volthub.protocol.engineio.handshake import ErrorCode, HttpError
from volthub.protocol.engineio.session import EngineIOSession, Settings

SETTINGS = Settings(ping_interval_ms=300, ping_timeout_ms=200, max_payload=1000, upgrade_timeout_ms=1000)


def open_polling(now: float = 0.0, settings: Settings = SETTINGS) -> EngineIOSession:
    session = EngineIOSession("sid1", settings, "polling", now)
    assert session.poll_begin(now) is None
    assert session.poll_ready
    handshake = session.poll_take()
    assert handshake[0] == "0"
    return session


def open_websocket(now: float = 0.0) -> EngineIOSession:
    session = EngineIOSession("sid1", SETTINGS, "websocket", now)
    [handshake] = session.take_outgoing()
    assert isinstance(handshake, str) and handshake[0] == "0"
    return session


def post(session: EngineIOSession, body: str | bytes, now: float = 0.0) -> list:
    assert session.post_begin(now) is None
    return session.receive_payload(body, now)


def assert_refused(result: object, code: ErrorCode) -> None:
    assert isinstance(result, HttpError) and result.status == 400 and result.code is code


def assert_gone(session: EngineIOSession, now: float) -> None:
    """The session is over: a request with its sid finds no session."""
    assert session.finished
    assert_refused(session.poll_begin(now), ErrorCode.UNKNOWN_SID)
