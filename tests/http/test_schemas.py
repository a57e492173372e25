"""The shared request/response models' own behaviour (volthub/http/schemas.py)."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.http.schemas import Body


@dataclass(frozen=True)
class _Request:
    action: str
    user_id: str | None
    duration_seconds: int | None


class _RequestBody(Body):
    action: str
    userId: str | None = None
    durationSeconds: int | None = None
    asBot: bool = False  # the route reads it; the service's request has no such field


def test_a_body_becomes_a_service_dataclass_by_the_naming_rule() -> None:
    body = _RequestBody(action="timeout", userId="u1", durationSeconds=60, asBot=True)
    assert body.to_dataclass(_Request) == _Request("timeout", "u1", 60)
    assert body.to_dataclass(_Request, user_id=None) == _Request("timeout", None, 60)
