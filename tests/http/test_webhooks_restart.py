"""A server killed with SIGKILL while deliveries are pending loses none of them."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import trio

from tests.conftest import insert_app
from tests.services.webhooks.support import start_receiver
from volthub.persistence import open_database

FANS = 20


async def register(http: httpx.AsyncClient, name: str) -> tuple[str, dict[str, str]]:
    response = await http.post("/api/auth/register", json={"username": name, "password": "correct horse battery"})
    assert response.status_code == 201, response.text
    body = response.json()
    return body["user"]["id"], {"Authorization": f"Bearer {body['token']}"}


@pytest.mark.slow
async def test_sigkill_with_pending_deliveries_loses_none(
    database_url: str, server_process: Any, receiver_tls: Any, nursery: trio.Nursery
) -> None:
    receiver, stop = await start_receiver(nursery, receiver_tls)
    release = trio.Event()

    async def hang(delivery: Any) -> tuple[int, dict[str, str]]:
        await release.wait()  # workers stay mid-request until the server dies
        return 503, {}

    receiver.respond = hang
    env = {
        "VOLTHUB_WEBHOOKS__ALLOW_PRIVATE_TARGETS": "true",
        "VOLTHUB_WEBHOOKS__CA_FILE": str(receiver_tls[0]),
        "VOLTHUB_WEBHOOKS__TIMEOUT_SECONDS": "2",
        "VOLTHUB_WEBHOOKS__RETRY_DELAYS": ",".join(["0"] + ["1"] * 19),
        "VOLTHUB_WEBHOOKS__DISABLE_AFTER_FAILURES": "1000",
        "VOLTHUB_WEBHOOKS__POLL_SECONDS": "1",
    }
    server = await trio.to_thread.run_sync(server_process, database_url, env)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        owner_id, owner = await register(http, "hookowner")
        database = open_database(database_url, 2)
        await database.open()
        try:
            client_id = await insert_app(database, owner_id)
        finally:
            await database.close()
        created = await http.post(
            f"/api/developer/apps/{client_id}/webhooks",
            json={"url": receiver.url(), "events": ["channel.follow"]},
            headers=owner,
        )
        assert created.status_code == 201, created.text
        hook = created.json()
        receiver.secret = hook["secret"]
        fans = set()
        for index in range(FANS):
            fan_id, fan = await register(http, f"fan{index}")
            fans.add(fan_id)
            assert (await http.post(f"/api/users/follow/{owner_id}", headers=fan)).status_code == 200
        with trio.fail_after(60):
            await receiver.wait_for(4)  # the pool is busy; the rest wait in the outbox

    await trio.to_thread.run_sync(server.kill)  # SIGKILL: no shutdown code runs
    receiver.respond = lambda delivery: (200, {})
    release.set()  # the hung requests now answer a dead connection: none succeeded
    restarted_at = len(receiver.received)

    server = await trio.to_thread.run_sync(server_process, database_url, env)
    delivered: set[str] = set()
    with trio.move_on_after(120):
        while True:
            # Read what came before waiting for more: the restarted server delivers while it
            # is still being waited for (on a busy machine, often everything).
            delivered = {orjson.loads(d.body)["data"]["userId"] for d in receiver.received[restarted_at:]}
            if delivered == fans:
                break
            await receiver.wait_for(len(receiver.received) + 1)
    # On failure, what the restarted server said: the deliveries are its to make.
    assert delivered == fans, f"{len(fans - delivered)} of {FANS} not delivered; server log:\n{server.log()}"
    problems = [d.problem for d in receiver.received if not d.verified]
    assert not problems, problems

    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        path = f"/api/developer/apps/{client_id}/webhooks/{hook['id']}/deliveries?limit=100"
        with trio.fail_after(30):
            while True:
                items = (await http.get(path, headers=owner)).json()["items"]
                if len(items) == FANS and all(item["status"] == "succeeded" for item in items):
                    break
                await trio.sleep(0.2)  # real time: the server is a child process
    stop.set()
