"""Fixtures of the HTTP tests (tests/http/): the chat environment, and the events an app
published (for the test module's own ``app`` fixture).

The app, its test client, users and live servers are in tests/conftest.py; the webhook
receiver in tests/services/webhooks/support.py (loaded as a plugin for every area).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.http.chat_env import ChatEnv, chat_app


@pytest.fixture
async def chat_env(sqlite_url: str) -> AsyncIterator[ChatEnv]:
    """The app for chat tests (tests/http/chat_env.py): rate limits off, on TrioClock."""
    application = chat_app(sqlite_url)
    async with application.test_app():
        yield ChatEnv(application)


@pytest.fixture
async def backend_chat_env(database_url: str) -> AsyncIterator[ChatEnv]:
    """The chat environment on each backend (SQLite, then PostgreSQL when it is available)."""
    application = chat_app(database_url)
    async with application.test_app():
        yield ChatEnv(application)


@pytest.fixture
def published(app: Any) -> list[Any]:
    """Every event the module's ``app`` puts on its bus, in order (on PostgreSQL through the
    relay, so a moment after the request that caused it)."""
    events: list[Any] = []
    app.extensions["volthub"].bus.subscribe(events.append)
    return events
