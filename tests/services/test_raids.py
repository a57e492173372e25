"""services.raids on SQLite and PostgreSQL: the viewer count comes from presence, and a
webhook of the target's app subscribed to `channel.raid` gets the incoming raid through the
outbox, in the raid's own transaction; a refused raid (not live, banned by the target)
leaves no delivery behind."""

from __future__ import annotations

from collections.abc import Iterable

import orjson
import pytest

from tests.conftest import insert_app, stored_user
from tests.services.test_points_earning import live
from tests.services.webhooks.test_outbox import deliveries, make_webhook
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import SystemClock
from volthub.hub.publisher import EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import chat as chat_repo
from volthub.services.raids import RaidBanned, RaidNotLive, raid
from volthub.services.webhooks.outbox import OutboxSink


class Present:
    def __init__(self, present: dict[str, tuple[list[str], int]]) -> None:
        self.present = present

    def snapshot(self, channel_id: str) -> tuple[Iterable[str], int]:
        return self.present.get(channel_id, ([], 0))


def _no_scopes(tx: Tx, user_id: str, client_id: str, scope: str) -> bool:
    return False


@pytest.fixture
def publisher(db: Database) -> EventPublisher:
    publisher = EventPublisher(db, InProcessBroker(), SystemClock())
    publisher.add_transaction_sink(OutboxSink(0, scope_check=_no_scopes))
    return publisher


async def test_the_targets_webhook_gets_the_incoming_raid(db: Database, publisher: EventPublisher) -> None:
    raider, target = await stored_user(db, "raider"), await stored_user(db, "target")
    webhook_id = await make_webhook(db, await insert_app(db, target), ["channel.raid"])
    presence = Present({raider: (["a", "b", "a"], 3)})

    with pytest.raises(RaidNotLive):
        await raid(publisher, presence, raider, "target")
    assert await deliveries(db) == []

    await live(db, raider)

    def ban(tx: Tx) -> None:
        chat_repo.set_ban(
            tx, channel_id=target, user_id=raider, moderator_id=None, reason=None, now_ms=1, expires_at=None
        )

    await db.write(ban)
    with pytest.raises(RaidBanned):
        await raid(publisher, presence, raider, "target")
    assert await deliveries(db) == []
    await db.write(lambda tx: chat_repo.remove_ban(tx, target, raider, 2))
    done = await raid(publisher, presence, raider, "Target")
    assert (done.target_id, done.target_username, done.viewers) == (target, "target", 5)
    [row] = await deliveries(db)
    assert (row["webhook_id"], row["event_name"]) == (webhook_id, "channel.raid")
    data = orjson.loads(row["body"])["data"]
    assert data["direction"] == "incoming" and data["fromChannelId"] == raider and data["viewers"] == 5
