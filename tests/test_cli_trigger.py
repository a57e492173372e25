"""`volthub trigger`: every emitted event, signed straight to a real HTTPS receiver running the
published verifier (docs/examples/webhook_receiver.py), and through a running server to a
Socket.IO client and the app's webhook, storing nothing (both backends)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trio

from tests.conftest import make_settings, register_live, serve_app
from tests.http.events.live import handshake, open_ws, receive
from tests.http.test_cluster import socket_event
from tests.services.webhooks.support import start_receiver
from volthub.cli import main
from volthub.loadtest.servers import free_port
from volthub.protocol import catalogue, trigger
from volthub.protocol.webhooks import generate_secret

ROOT = Path(__file__).resolve().parents[1]
RECEIVER = ROOT / "docs" / "examples" / "webhook_receiver.py"
WAIT = 10.0  # a bound on waiting for real servers; never asserted on


def test_list_prints_every_emitted_event_with_its_fields(capsys: Any) -> None:
    assert main(["trigger", "--list", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["events"]
    assert [e["name"] for e in listed] == trigger.names()
    follow = next(e for e in listed if e["name"] == "channel.follow")
    assert follow["aliases"] == ["follow"] and "followedAt" in {f["name"] for f in follow["fields"]}
    assert "channel.hype_train.begin" not in {e["name"] for e in listed}  # never emitted
    assert main(["trigger", "--list"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in trigger.names())


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["channel.hype_train.begin", "--forward", "https://x.example/", "--secret", "s"], "not an emitted event"),
        (["channel.follow", "--forward", "http://hooks.example/", "--secret", "s"], "loopback"),
        (["channel.follow", "--forward", "https://x.example/"], "--secret"),
        (["channel.follow", "--forward", "https://x.example/", "--secret", "s", "--field", "nope=1"], "nope"),
        (["channel.follow"], "--channel"),
    ],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], problem: str, capsys: Any) -> None:
    assert main(["trigger", *argv]) == 2
    err = capsys.readouterr().err
    assert problem in err and err.count("\n") == 1


class PublishedReceiver:
    """docs/examples/webhook_receiver.py in its own process, with a trustme certificate."""

    def __init__(self, tls: tuple[Path, Path, Path], secret: str, save: Path) -> None:
        ca, cert, key = tls
        self.ca = ca
        self.port = free_port()
        self.save = save
        env = {**os.environ, "WEBHOOK_SECRET": secret, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, str(RECEIVER), "--cert", str(cert), "--key", str(key)]
        command += ["--port", str(self.port), "--save", str(save)]
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/hooks"

    async def wait_listening(self) -> None:
        import ssl

        context = ssl.create_default_context(cafile=str(self.ca))
        with trio.fail_after(WAIT):
            while True:
                try:
                    async with httpx.AsyncClient(verify=context) as http:
                        if (await http.get(self.url)).status_code == 200:
                            return
                except httpx.HTTPError:
                    await trio.sleep(0.05)

    def stop(self) -> tuple[str, str]:
        self.process.terminate()
        out, err = self.process.communicate(timeout=WAIT)
        return out, err


async def test_forward_sends_every_emitted_event_signed_as_a_real_delivery(
    receiver_tls: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    secret = generate_secret()
    receiver = PublishedReceiver(receiver_tls, secret, tmp_path / "saved")
    try:
        await receiver.wait_listening()
        ca = str(receiver_tls[0])
        for name in trigger.names():
            argv = ["trigger", name, "--forward", receiver.url, "--secret", secret, "--ca-file", ca]
            # Exit 0 only on a 2xx: the receiver answers 204 after verify() accepted it, 401 otherwise.
            assert await trio.to_thread.run_sync(main, argv) == 0, name
        # An override, and a wrong secret (refused by the receiver: exit 1).
        argv = ["trigger", "raid", "--forward", receiver.url, "--secret", secret, "--ca-file", ca]
        assert await trio.to_thread.run_sync(main, [*argv, "--field", "viewers=250"]) == 0
        argv = ["trigger", "follow", "--forward", receiver.url, "--secret", generate_secret(), "--ca-file", ca]
        assert await trio.to_thread.run_sync(main, argv) == 1
    finally:
        out, err = receiver.stop()
    bodies = [orjson.loads(path.read_bytes()) for path in sorted((tmp_path / "saved").glob("*.body"))]
    assert sorted(b["event"] for b in bodies) == sorted([*trigger.names(), "channel.raid"])
    assert all(b["type"] == b["event"] and b["data"]["isTest"] is True for b in bodies)
    assert 250 in [b["data"].get("viewers") for b in bodies if b["event"] == "channel.raid"]
    for body in bodies:
        required = {f.name for f in catalogue.BY_NAME[body["event"]].fields if not f.optional}
        assert required <= set(body["data"]), body["event"]
    assert err.count("refused") == 1  # the wrong secret, and only it


def _row_counts(database: Any) -> dict[str, int]:
    def count(tx: Any) -> dict[str, int]:
        if database.url.startswith("sqlite"):
            query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        else:
            query = "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()"
        tables = [row["name"] for row in tx.execute(query)]
        return {table: int(tx.scalar(f"SELECT COUNT(*) FROM {table}")) for table in tables}

    return database.read(count)  # type: ignore[no-any-return]


async def test_channel_sends_every_emitted_event_to_sockets_and_webhooks_storing_nothing(
    database_url: str, receiver_tls: tuple[Path, Path, Path], nursery: trio.Nursery
) -> None:
    receiver, stop_receiver = await start_receiver(nursery, receiver_tls)
    settings = make_settings(
        database_url,
        webhooks={"allow_private_targets": True, "ca_file": str(receiver_tls[0])},
    )
    stop = trio.Event()
    server = await serve_app(nursery, settings, stop)
    owner = await register_live(server.url)
    webhook_events = [n for n in trigger.names() if catalogue.WEBHOOKS in catalogue.BY_NAME[n].transports]
    async with httpx.AsyncClient(base_url=server.url, headers=owner.headers, timeout=WAIT) as http:
        app = await http.post("/api/developer/apps", json={"name": "trigger app", "redirectUris": []})
        assert app.status_code == 201, app.text
        client_id = app.json()["clientId"]
        hook = await http.post(
            f"/api/developer/apps/{client_id}/webhooks", json={"url": receiver.url(), "events": webhook_events}
        )
        assert hook.status_code == 201, hook.text
        receiver.secret = hook.json()["secret"]
    ws = await open_ws(nursery, server.events_url, "/ws/events/")  # the gateway, as by default
    handshake(await receive(ws))
    await ws.send_message("40" + orjson.dumps({"token": owner.token}).decode())
    with trio.fail_after(WAIT):
        assert (await socket_event(ws, "connected"))["authenticated"] is True

    database = server.app.extensions["volthub"].db
    before = await _row_counts(database)
    delivered = 0
    for name in trigger.names():
        argv = ["trigger", name, "--channel", owner.username, "--server", server.url, "--token", owner.token]
        assert await trio.to_thread.run_sync(main, argv) == 0, name
        if catalogue.delivered_over_events_api(name):
            with trio.fail_after(WAIT):
                data = await socket_event(ws, name)
            assert data["isTest"] is True, name
        if name in webhook_events:
            delivered += 1
            with trio.fail_after(WAIT):
                await receiver.wait_for(delivered)
            last = receiver.received[-1]
            body = orjson.loads(last.body)
            assert last.verified and body["event"] == name and body["data"]["isTest"] is True, name
    assert len(receiver.received) == len(webhook_events)
    after = await _row_counts(database)
    # The process's presence rows are its own heartbeat, written on a timer whatever happens.
    before.pop("presence", None), after.pop("presence", None)
    assert after == before  # nothing stored: no outbox row, no attempt, no event log row, no money
    if "event_log" in after:
        assert after["event_log"] == 0
    stop.set()
    stop_receiver.set()
