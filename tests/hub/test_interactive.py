"""Interactive components in the real actor on both backends: deadlines across processes,
bets through the channel-points ledger, and the feed that moves goals and subathons."""

from __future__ import annotations

import uuid

import trio

from tests.conftest import stored_user
from tests.hub.conftest import Hub, two_processes
from tests.points_support import mint_points
from volthub.hub.clock import TrioClock
from volthub.hub.components import goals, polls, predictions, timers
from volthub.hub.interactive_feed import InteractiveFeed
from volthub.hub.interactive_store import read_timers
from volthub.hub.publisher import Emitter
from volthub.persistence import ledger


async def settled(hub: Hub, channel: str) -> None:
    """Every deadline step already due has been taken (the actor's loop is sequential)."""
    for _ in range(2):
        await hub.registry.call(channel, timers.CountForTimers("settle", "subscription", 0))


async def test_two_processes_end_a_poll_once_and_a_timer_once(db, nursery, mock_clock) -> None:
    clock = TrioClock()
    channel = await stored_user(db)
    async with trio.open_nursery() as first_process:
        before = Hub(db, clock=clock)
        await first_process.start(before.registry.run)
        poll = await before.registry.call(channel, polls.StartPoll("Q?", ("a", "b"), 30))
        await before.registry.call(channel, timers.StartTimer(40, "T"))
        first_process.cancel_scope.cancel()
    # Two processes on the same database resume both deadlines; one of them takes each.
    after, other = await two_processes(db, nursery, channel, clock=clock)
    mock_clock.jump(41)
    for hub in (after, other):
        await settled(hub, channel)
    ends = after.named("channel.poll.end") + other.named("channel.poll.end")
    assert len(ends) == 1 and ends[0].data["pollId"] == poll.id
    timer_ends = after.named("channel.timer.update") + other.named("channel.timer.update")
    assert [e.data["action"] for e in timer_ends] == ["ended"]


async def balance(db, account: str) -> int:
    return await db.read(lambda tx: ledger.balance(tx, account))


async def test_bets_move_points_into_escrow_and_resolve_empties_it(db, start_hub) -> None:
    hub = await start_hub()
    channel = await stored_user(db)
    users = [await stored_user(db) for _ in range(3)]
    for user in users:
        await mint_points(db, channel, user, 500)
    p = await hub.registry.call(channel, predictions.StartPrediction("Win?", ("Yes", "No"), 60))
    yes, no = (o.id for o in p.outcomes)
    await hub.registry.call(channel, predictions.PlaceBet(p.id, users[0], yes, 100))
    await hub.registry.call(channel, predictions.PlaceBet(p.id, users[1], yes, 200))
    await hub.registry.call(channel, predictions.PlaceBet(p.id, users[2], no, 101))
    escrow = ledger.system_account("points", f"prediction:{p.id}", channel)
    assert await balance(db, escrow) == 401
    ended = await hub.registry.call(channel, predictions.ResolvePrediction(p.id, yes))
    assert ended.status == "resolved" and await balance(db, escrow) == 0
    got = [await balance(db, ledger.user_account("points", u, channel)) for u in users]
    # pool 401 over winning 300: floor(133.67)=133, floor(267.33)=267, remainder 1 to the larger bet
    assert got == [400 + 133, 300 + 268, 399]
    assert sum(got) == 1500
    names = [e.name for e in hub.events if e.name.startswith("channel.prediction")]
    assert names == ["channel.prediction.begin", "channel.prediction.lock", "channel.prediction.end"]


async def test_a_refused_bet_leaves_nothing_behind(db, start_hub) -> None:
    hub = await start_hub()
    channel, user = await stored_user(db), await stored_user(db)
    await mint_points(db, channel, user, 50)
    p = await hub.registry.call(channel, predictions.StartPrediction("Win?", ("Yes", "No"), 60))
    try:
        await hub.registry.call(channel, predictions.PlaceBet(p.id, user, p.outcomes[0].id, 51))
    except Exception as exc:
        assert exc.refusal.code == "insufficient_funds"  # type: ignore[attr-defined]
    else:
        raise AssertionError("the bet went through")
    assert await balance(db, ledger.user_account("points", user, channel)) == 50
    await hub.registry.call(channel, predictions.CancelPrediction(p.id))


def publish(hub: Hub, channel: str, name: str, data: dict, event_id: str | None = None) -> None:
    emitter = Emitter(now_ms=1)
    event = emitter.emit(channel, name, data)
    if event_id is not None:
        object.__setattr__(event, "id", event_id)
    hub.bus.publish(event)


async def test_the_feed_moves_goals_and_subathon_timers_once_per_event(db, start_hub, nursery) -> None:
    hub = await start_hub()
    channel = await stored_user(db)
    await nursery.start(InteractiveFeed(hub.bus, hub.registry).run)
    follows = await hub.registry.call(channel, goals.CreateGoal("followers", "Follows", 2))
    subs = await hub.registry.call(channel, goals.CreateGoal("subscriptions", "Subs", 10))
    volts = await hub.registry.call(channel, goals.CreateGoal("volts", "Volts", 1000))
    subathon = timers.Subathon(seconds_per_sub=60, seconds_per_gift=30, seconds_per_volt=0.1)
    timer = await hub.registry.call(channel, timers.StartTimer(600, "Subathon", subathon))
    person = {"userId": "x", "username": "x", "displayName": "X"}
    follow_id = str(uuid.uuid4())
    publish(hub, channel, "channel.follow", {**person, "followedAt": "t"}, follow_id)
    publish(hub, channel, "channel.follow", {**person, "followedAt": "t"}, follow_id)  # relayed twice
    publish(hub, channel, "channel.follow", {**person, "followedAt": "t"})
    publish(hub, channel, "channel.subscribe", {**person, "tier": "tier1", "isGift": False, "months": 1})
    publish(hub, channel, "channel.subscribe", {**person, "tier": "tier1", "isGift": True, "months": 1})
    publish(hub, channel, "channel.subscription.gift", {**person, "tier": "tier1", "quantity": 5})
    publish(hub, channel, "channel.volts", {**person, "amount": 250, "message": None})
    publish(hub, channel, "channel.volts", {**person, "amount": 99, "isTest": True})
    test_event = Emitter(now_ms=1).emit(channel, "channel.volts", {**person, "amount": 5}, is_test=True)
    hub.bus.publish(test_event)
    publish(hub, channel, "channel.follow", {**person, "followedAt": "t"})  # the last one
    with trio.fail_after(10):  # the feed hands the commands over one by one, in order
        while len(hub.named("channel.goal.progress")) < 6:
            await trio.sleep(0.01)
    stored = await db.read(
        lambda tx: {
            g.id: g.current
            for g in __import__("volthub.hub.interactive_store", fromlist=["read_goals"]).read_goals(tx, channel)
        }
    )
    assert stored == {follows.id: 3, subs.id: 6, volts.id: 250}
    completed = [e.data["goalId"] for e in hub.named("channel.goal.completed")]
    assert completed == [follows.id]
    added = [
        (e.data["reason"], e.data["addedSeconds"])
        for e in hub.named("channel.timer.update")
        if e.data["action"] == "time_added"
    ]
    assert added == [("subscription", 60), ("gift", 150), ("volts", 25)]
    assert timer["remainingSeconds"] == 600


async def test_a_huge_volts_send_saturates_a_subathon_timer(db, start_hub, nursery) -> None:
    hub = await start_hub()
    channel = await stored_user(db)
    await nursery.start(InteractiveFeed(hub.bus, hub.registry).run)
    subathon = timers.Subathon(seconds_per_volt=timers.SUBATHON_RATE_MAX)
    timer = await hub.registry.call(channel, timers.StartTimer(600, "Subathon", subathon))
    person = {"userId": "x", "username": "x", "displayName": "X"}
    publish(hub, channel, "channel.volts", {**person, "amount": 3_000_000, "message": None})
    with trio.fail_after(10):
        while not [e for e in hub.named("channel.timer.update") if e.data["action"] == "time_added"]:
            await trio.sleep(0.01)
    [added] = [e for e in hub.named("channel.timer.update") if e.data["action"] == "time_added"]
    assert added.data["remainingSeconds"] == timers.REMAINING_MAX
    stored = await db.read(lambda tx: {t.id: t for t in read_timers(tx, channel)})
    assert stored[timer["id"]].remaining_ms == timers.REMAINING_MAX * 1000
