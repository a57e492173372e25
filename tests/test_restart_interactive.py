"""An open poll and a running timer end on time after SIGKILL, once; with two processes on
one PostgreSQL database the poll still ends once, and the relay brings that one end to the
observers of both processes, once each. Real server processes and real time."""

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
        self.ids: list[str | None] = []  # the SSE `id:` (event id) of each of `events`
        self.ready = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self._read()
        except httpx.HTTPError:  # the server stopped at the end of the test
            return

    def _read(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        params = {"events": "channel.poll.end,channel.timer.update", "messages": "named"}
        with (
            httpx.Client(base_url=self.base, timeout=httpx.Timeout(5, read=60)) as http,
            http.stream("GET", "/api/events/stream", headers=headers, params=params) as response,
        ):
            event_id: str | None = None
            for line in response.iter_lines():  # keep-alive comments arrive every 15 s
                if self.stop.is_set():
                    return
                if line.startswith("event: connected"):
                    self.ready.set()
                elif line.startswith("id: "):
                    event_id = line[4:]
                elif line.startswith("data: ") and '"event"' in line:
                    self.ids.append(event_id)
                    self.events.append(orjson.loads(line[6:]))
                elif not line:  # the blank line that ends an event
                    event_id = None

    def named(self, name: str) -> list[tuple[str | None, dict[str, Any]]]:
        """(event id, envelope) of each `name` event this observer got."""
        return [(i, e) for i, e in zip(self.ids, self.events, strict=True) if e["event"] == name]


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

    # Restart: one process on SQLite; two processes sharing the database on PostgreSQL, one
    # observer on each. Both processes resume the deadlines and race their guarded writes.
    restarted = [server_process(database_url)]
    if database_url.startswith("postgresql"):
        restarted.append(server_process(database_url))
    watchers = [_watch(process.url, owner["token"]) for process in restarted]
    deadline = time.time() + 30
    while time.time() < deadline:
        if all(w.named("channel.poll.end") and w.named("channel.timer.update") for w in watchers):
            break
        time.sleep(0.2)  # real time: server processes run the deadlines
    time.sleep(2)  # room for a duplicate to show up
    for watcher in watchers:
        watcher.stop.set()
    events = [[(i, e["event"], e["timestamp"]) for i, e in zip(w.ids, w.events, strict=True)] for w in watchers]
    # Every observer, whichever process it is on, gets each end exactly once...
    poll_ends = [w.named("channel.poll.end") for w in watchers]
    timer_updates = [w.named("channel.timer.update") for w in watchers]
    assert all(len(got) == 1 for got in poll_ends), events
    assert all(len(got) == 1 for got in timer_updates), events
    # ...and it is the same event everywhere: one guarded write won, one event was emitted.
    poll_end_ids = {i for got in poll_ends for i, _ in got}
    timer_update_ids = {i for got in timer_updates for i, _ in got}
    assert len(poll_end_ids) == 1 and None not in poll_end_ids, events
    assert len(timer_update_ids) == 1 and None not in timer_update_ids, events
    poll_end, timer_update = poll_ends[0][0][1], timer_updates[0][0][1]
    assert poll_end["data"]["pollId"] == poll["id"], events
    assert timer_update["data"]["status"] == "ended", events

    def ms(iso: str) -> float:
        from datetime import datetime

        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000

    # On time: the end is written at the deadline, not later than a second after it.
    assert 0 <= ms(poll_end["data"]["endedAt"]) - ms(poll["endsAt"]) < 1000
    assert 0 <= ms(timer_update["timestamp"]) - ms(timer["endsAt"]) < 1000
    active = httpx.get(f"{restarted[0].url}/api/dashboard/polls/active", headers=headers, timeout=10).json()
    assert active == {"poll": None}
