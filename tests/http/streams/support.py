"""A live server with ingest configured, and helpers to drive the hooks and read SSE."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import trio
from httpx_sse import ServerSentEvent

from tests.conftest import make_settings
from volthub.config import Settings

HOOK_SECRET = "hook-secret-for-tests"
HOOK = {"Authorization": f"Bearer {HOOK_SECRET}"}
INFO = "/api/integrations/oauth/stream/info"
SETUP = "/api/integrations/oauth/stream/setup"


def ingest_settings(database_url: str) -> Settings:
    """Ingest hooks accepted (with `HOOK`), no rate limits."""
    return make_settings(database_url, ingest={"hook_secret": HOOK_SECRET}, ratelimit={"enabled": False})


async def stream_key(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    response = await http.get(SETUP, headers=headers)
    assert response.status_code == 200, response.text
    return str(response.json()["streamKey"])


async def hook(http: httpx.AsyncClient, name: str, key: str) -> httpx.Response:
    return await http.post(f"/api/ingest/{name}", json={"streamKey": key}, headers=HOOK)


class Events:
    """An open SSE stream, read event by event."""

    def __init__(self, source: Any) -> None:
        self._events = source.aiter_sse()

    async def next(self, name: str | None = None) -> tuple[ServerSentEvent, dict[str, Any]]:
        with trio.fail_after(10):
            while True:
                sse = await self._events.__anext__()
                if name is None or sse.event == name:
                    return sse, orjson.loads(sse.data)
