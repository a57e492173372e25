"""An open poll and a running timer end on time after SIGKILL, once; with two processes on
one PostgreSQL database the poll still ends once. Real server processes and real time."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

pytestmark = pytest.mark.slow


def _register(base: str, username: str) -> dict[str, Any]:
    response = httpx.post(
        f"{base}/api/auth/register", json={"username": username, "password": "long enough pw"}, timeout=10
    )
    assert response.status_code == 201, response.text
    return response.json()


class Watcher(threading.Thread):
    """An SSE client (a thread with its own httpx client) collecting the channel's events."""

    def __init__(self, base: str, token: str) -> None:
        super().__init__(daemon=True)
        self.base, self.token = base, token
        self.events: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self._read()
        except httpx.HTTPError:  # the server stopped at the end of the test
            return

    def _read(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        params = {"events": "channel.poll.end,channel.timer.update"}
        with (
            httpx.Client(base_url=self.base, timeout=httpx.Timeout(5, read=60)) as http,
            http.stream("GET", "/api/events/stream", headers=headers, params=params) as response,
        ):
            for line in response.iter_lines():  # keep-alive comments arrive every 15 s
                if self.stop.is_set():
                    return
                if line.startswith("event: connected"):
                    self.ready.set()
                elif line.startswith("data: ") and '"event"' in line:
                    self.events.append(orjson.loads(line[6:]))


def _watch(base: str, token: str) -> Watcher:
    watcher = Watcher(base, token)
    watcher.start()
    assert watcher.ready.wait(10)
    return watcher


def test_open_poll_and_running_timer_end_on_time_after_sigkill(database_url, server_process):
    server = server_process(database_url)
    owner = _register(server.url, f"kill{int(time.time() * 1000) % 10**8}")
    headers = {"Authorization": f"Bearer {owner['token']}"}
    poll = httpx.post(
        f"{server.url}/api/dashboard/polls",
        json={"title": "Survive?", "options": ["yes", "no"], "durationSeconds": 15},
        headers=headers,
        timeout=10,
    ).json()["poll"]
    timer = httpx.post(
        f"{server.url}/api/dashboard/timers", json={"durationSeconds": 12}, headers=headers, timeout=10
    ).json()["timer"]
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)

    # Restart: one process on SQLite; two processes sharing the database on PostgreSQL.
    restarted = [server_process(database_url)]
    if database_url.startswith("postgresql"):
        restarted.append(server_process(database_url))
    watchers = [_watch(process.url, owner["token"]) for process in restarted]
    deadline = time.time() + 30
    while time.time() < deadline:
        ended = sum(1 for w in watchers for e in w.events if e["event"] == "channel.poll.end")
        if ended and any(e["event"] == "channel.timer.update" for w in watchers for e in w.events):
            break
        time.sleep(0.2)  # real time: server processes run the deadlines
    time.sleep(2)  # room for a duplicate to show up
    for watcher in watchers:
        watcher.stop.set()
    events = [e for w in watchers for e in w.events]
    poll_ends = [e for e in events if e["event"] == "channel.poll.end"]
    timer_updates = [e for e in events if e["event"] == "channel.timer.update"]
    assert len(poll_ends) == 1 and poll_ends[0]["data"]["pollId"] == poll["id"], events
    assert len(timer_updates) == 1 and timer_updates[0]["data"]["status"] == "ended", events

    def ms(iso: str) -> float:
        from datetime import datetime

        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000

    # On time: the end is written at the deadline, not later than a second after it.
    assert 0 <= ms(poll_ends[0]["data"]["endedAt"]) - ms(poll["endsAt"]) < 1000
    assert 0 <= ms(timer_updates[0]["timestamp"]) - ms(timer["endsAt"]) < 1000
    active = httpx.get(f"{restarted[0].url}/api/dashboard/polls/active", headers=headers, timeout=10).json()
    assert active == {"poll": None}
