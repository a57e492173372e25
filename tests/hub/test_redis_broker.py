"""What is Redis's own in its broker (hub/redis_bus.py RedisBroker) against real redis-server
processes: per-channel interest, streams, the outage queue, cluster sharding, the sweeper,
TLS. What every broker does is in test_broker_conformance.py; the set-up is shared
(tests/hub/brokers.py): several brokers on one PostgreSQL database stand for several
processes."""

from __future__ import annotations

import uuid
from typing import Any

import trio
import trio.testing
from prometheus_client import REGISTRY

from tests.hub.brokers import WAIT, Process, texts
from tests.redis_support import RedisServer, make_tls_files, redis_cluster, redis_tls_server
from volthub.hub.clock import SystemClock, to_ms
from volthub.hub.publisher import Event
from volthub.hub.redis_bus import RedisBroker, RedisSettings
from volthub.hub.redis_client import channel_subject, stream_key, user_subject

__all__ = ["redis_cluster", "redis_tls_server"]  # fixtures


async def start(start_process: Any, **settings: Any) -> Process:
    """A process of the deployment, on the test's redis-server unless `url`/`nodes` say."""
    process: Process = await start_process("redis", **settings)
    return process


async def test_a_process_hears_only_the_channels_it_follows_in_order_once(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    await two.follow("c1")
    await one.emit("c1", "a", "b")
    await two.emit("c1", "c")
    await one.emit("c2", "x")  # nobody else follows c2
    await two.emit("c1", "end")
    await two.wait_for(lambda heard: "end" in texts(heard))
    assert texts(two.heard, "c1") == ["a", "b", "c", "end"]
    assert [e.seq for e in two.heard if e.channel_id == "c1"] == [1, 2, 3, 4]
    assert texts(two.heard, "c2") == []
    await one.broker.caught_up()
    assert texts(one.heard) == ["a", "b", "x"]  # its own events, once, without following
    assert channel_subject("c2") not in two.broker.subscribed()


async def test_following_a_channel_fills_the_resume_buffer_from_the_stream(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    await one.emit("c1", "a", "b", "c")
    await one.broker.sent_all()
    await two.follow("c1")
    first = two.fanout.since("c1", None)
    assert first.found
    buffered = two.fanout._recent["c1"]
    assert [e.data["text"] for e in buffered] == ["a", "b", "c"]
    resume = two.fanout.since("c1", buffered[0].id)
    assert [e.data["text"] for e in resume.events] == ["b", "c"]


async def test_without_the_stream_the_resume_buffer_comes_from_the_log(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    await one.emit("c1", "a", "b")
    await one.broker.sent_all()
    assert two.redis is not None
    two.redis.cli("FLUSHALL")  # the streams are gone; PostgreSQL still has the events
    await two.follow("c1")
    assert [e.data["text"] for e in two.fanout._recent["c1"]] == ["a", "b"]


async def test_a_test_event_reaches_other_processes_and_is_stored_nowhere(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    await two.follow("c1")
    one.publisher.publish_ephemeral("c1", "chat.message", {"text": "just a test"})
    await one.emit("c1", "real")
    await two.wait_for(lambda heard: "real" in texts(heard))
    assert [(e.data["text"], e.is_test, e.seq) for e in two.heard] == [("just a test", True, None), ("real", False, 1)]
    logged = await one.database.read(lambda tx: tx.scalar("SELECT count(*) FROM event_log"))
    assert logged == 1  # the real event only
    assert one.redis is not None and one.redis.cli("XLEN", stream_key("c1")).strip() == "1"


async def test_a_channel_nobody_needs_is_unsubscribed_after_the_linger(start_process: Any) -> None:
    one = await start(start_process, unsubscribe_after_seconds=0.2)
    await one.follow("c1")
    assert channel_subject("c1") in one.broker.subscribed()
    one.broker.channel_interest("c1", False)
    with trio.fail_after(WAIT):
        while channel_subject("c1") in one.broker.subscribed():
            await trio.sleep(0.05)
    assert "c1" not in one.broker._followed


async def test_badge_changes_follow_the_member_not_the_channel(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    two.broker.member_interest("member", True)
    with trio.fail_after(WAIT):
        while user_subject("member") not in two.broker.subscribed():
            await trio.sleep(0.05)
    await one.emit("c1", "badges", name="internal.member.badges", userId="member")
    await two.wait_for(lambda heard: "badges" in texts(heard))
    assert texts(two.heard) == ["badges"]


async def test_a_revoked_grant_reaches_every_process(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    await one.emit("someone", "revoked", name="user.authorization.revoke", userId="someone", clientId="app")
    await two.wait_for(lambda heard: "revoked" in texts(heard))


async def test_broker_down_events_wait_and_go_out_in_order_and_followers_catch_up(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    await two.follow("c1")
    await one.emit("c1", "before")
    await two.wait_for(lambda heard: "before" in texts(heard))
    redis = one.redis
    assert redis is not None
    redis.stop()
    with trio.fail_after(WAIT):
        while two.broker.problem is None or one.broker.problem is None:
            await trio.sleep(0.05)
    assert "unreachable" in (two.broker.problem or "")
    await one.emit("c1", "during 1", "during 2")  # the write is acknowledged regardless
    redis.start()
    await one.emit("c1", "after")
    await two.wait_for(lambda heard: "after" in texts(heard))
    assert texts(two.heard, "c1") == ["before", "during 1", "during 2", "after"]
    assert [e.seq for e in two.heard] == [1, 2, 3, 4]
    with trio.fail_after(WAIT):
        await one.broker.sent_all()
    assert two.broker.problem is None


async def test_two_processes_exchange_events_through_shards_on_different_nodes(
    start_process: Any, redis_cluster: list[RedisServer]
) -> None:
    nodes = (redis_cluster[0].node,)
    one, two = await start(start_process, nodes=nodes), await start(start_process, nodes=nodes)
    # Channels whose slots live on each of the three nodes.
    channels: dict[str, str] = {}
    index = 0
    while len(channels) < 3:
        channel = f"chan{index}"
        index += 1
        slot = int(redis_cluster[0].cli("CLUSTER", "KEYSLOT", channel_subject(channel)))
        owner = next(node.node for node in redis_cluster if _owns(node, slot))
        channels.setdefault(owner, channel)
    await two.follow(*channels.values())
    await one.follow(*channels.values())
    for channel in channels.values():
        await one.emit(channel, f"from one {channel}")
        await two.emit(channel, f"from two {channel}")
    for process in (one, two):
        await process.wait_for(lambda heard: len(heard) == 6)
        for channel in channels.values():
            assert texts(process.heard, channel) == [f"from one {channel}", f"from two {channel}"]
    for node in redis_cluster:  # each node carried its own channel's stream
        assert node.cli("DBSIZE") == "1"


def _owns(node: RedisServer, slot: int) -> bool:
    for line in node.cli("CLUSTER", "NODES").splitlines():
        fields = line.split()
        if "myself" not in fields[2]:
            continue
        for part in fields[8:]:
            low, _, high = part.partition("-")
            if int(low) <= slot <= int(high or low):
                return True
    return False


def swept_total() -> float:
    return REGISTRY.get_sample_value("volthub_bus_swept_events_total") or 0.0


async def test_a_dead_publishers_logged_events_are_swept_to_followers_once(
    start_process: Any, mock_clock: trio.testing.MockClock
) -> None:
    """A publisher killed between its commit and handing the event to Redis: the event is in
    the log only. A follower's sweeper delivers it at its next round, in order, once."""
    mock_clock.autojump_threshold = 1.0  # real seconds idle: a broken sweep fails, not hangs
    one, two = await start(start_process), await start(start_process, sweep_seconds=1.0)
    await two.follow("c1")
    await one.emit("c1", "a")
    await two.wait_for(lambda heard: texts(heard) == ["a"])

    lost = Event(str(uuid.uuid4()), "chat.message", "c1", {"text": "lost"}, "2026-01-01T00:00:00Z")
    await one.database.write(lambda tx: one.broker.append(tx, [lost], to_ms(SystemClock().now())))
    two.broker.sweeper.grace = 3600.0
    assert await two.broker.sweeper.sweep_once() == 0  # within its grace: maybe still on its way
    two.broker.sweeper.grace = 0.0
    swept_before = swept_total()
    mock_clock.jump(1.0)  # the sweeper's interval
    await two.wait_for(lambda heard: "lost" in texts(heard))
    assert two.broker.sweeper.swept == 1
    assert swept_total() == swept_before + 1, "operators see it as volthub_bus_swept_events_total"
    await one.emit("c1", "b")
    await two.wait_for(lambda heard: "b" in texts(heard))
    assert texts(two.heard) == ["a", "lost", "b"]  # in order, once
    assert [e.seq for e in two.heard] == [1, 2, 3]
    assert await two.broker.sweeper.sweep_once() == 0  # nothing left behind


async def test_a_process_that_follows_nothing_sweeps_nothing(start_process: Any) -> None:
    idle = await start(start_process, sweep_seconds=1.0)
    reads = 0
    real_read = idle.database.read

    async def counting(fn: Any) -> Any:
        nonlocal reads
        reads += 1
        return await real_read(fn)

    idle.database.read = counting  # type: ignore[method-assign]
    assert await idle.broker.sweeper.sweep_once() == 0
    assert reads == 0  # no query at all


async def test_rediss_carries_events_with_the_servers_certificate_verified(
    start_process: Any, redis_tls_server: RedisServer, tmp_path: Any
) -> None:
    """A TLS-only redis-server: with its CA (`[cluster] redis_ca_file`) events flow; a client
    that does not trust the CA never connects."""
    assert redis_tls_server.url.startswith("rediss://") and redis_tls_server.tls is not None
    ca_file = str(redis_tls_server.tls.ca)
    one = await start(start_process, url=redis_tls_server.url, ca_file=ca_file)
    two = await start(start_process, url=redis_tls_server.url, ca_file=ca_file)
    await two.follow("c1")
    await one.emit("c1", "over tls")
    await two.wait_for(lambda heard: texts(heard) == ["over tls"])

    stranger_ca = str(make_tls_files(tmp_path / "other").ca)
    untrusting = RedisBroker(one.database, SystemClock(), RedisSettings(url=redis_tls_server.url, ca_file=stranger_ca))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(untrusting.run)
        with trio.move_on_after(1.0):  # a bound on waiting, not a timing assertion
            await untrusting.wait_connected()
        assert not untrusting.connected
        nursery.cancel_scope.cancel()
