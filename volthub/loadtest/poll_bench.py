"""Votes per second into one poll: 2,000 voters, every vote durable.

    python -m volthub.loadtest.poll_bench --database sqlite:///var/poll-bench.db --voters 2000
    python -m volthub.loadtest.poll_bench --database postgresql://postgres@127.0.0.1:5432/bench

In one process, the way the app runs it: the channel's actor (hub/actor.py) with every
component kind, the one publish path and the real store (SQLite in WAL mode with
`synchronous=FULL`). `--voters` users are written first; one poll is started; then every
voter votes at once (`--rounds` polls in a row). A vote counts when its command is
answered, which the actor does only after the transaction holding it has committed, so
every counted vote is durable. The actor drains what is queued into one transaction (up to
its batch size), which is what makes thousands of durable votes a second possible.
Reports votes per second and latency percentiles, and checks the stored tally: a poll whose
stored votes are not one per voter makes the exit status 1.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
import uuid
from pathlib import Path

import trio

from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import TrioClock
from volthub.hub.components import polls
from volthub.hub.publisher import EventPublisher
from volthub.hub.registry import ActorRegistry
from volthub.loadtest.metrics import percentile
from volthub.persistence import interactive as interactive_repo
from volthub.persistence import migrate, open_database
from volthub.persistence import users as users_repo


async def _users(database, count: int) -> list[str]:  # type: ignore[no-untyped-def]
    ids = [str(uuid.uuid4()) for _ in range(count)]

    def create(tx) -> None:  # type: ignore[no-untyped-def]
        for user_id in ids:
            users_repo.create_user(
                tx,
                user_id=user_id,
                username=f"v{user_id[:20]}".replace("-", ""),
                display_name="Voter",
                password_hash="x",
                now_ms=1,
            )

    await database.write(create)
    return ids


async def run(database_url: str, voters: int, rounds: int) -> dict[str, float]:
    database = open_database(database_url, pool_size=8)
    await database.open()
    await migrate(database)
    channel, *people = await _users(database, voters + 1)
    clock = TrioClock()
    registry = ActorRegistry(
        database, EventPublisher(database, InProcessBroker(), clock), clock, inbox_size=voters + 16
    )
    latencies: list[float] = []
    elapsed = 0.0
    miscounted = 0  # polls whose stored tally is not one vote per voter
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        for _ in range(rounds):
            poll = await registry.call(channel, polls.StartPoll("Bench?", ("a", "b", "c"), 1800))
            options = [option.id for option in poll.options]

            async def vote(index: int, user_id: str) -> None:
                began = time.perf_counter()
                await registry.call(channel, polls.Vote(poll.id, user_id, options[index % 3]))
                latencies.append(time.perf_counter() - began)

            started = time.perf_counter()
            async with trio.open_nursery() as voting:
                for index, user_id in enumerate(people):
                    voting.start_soon(vote, index, user_id)
            elapsed += time.perf_counter() - started
            tally = await database.read(functools.partial(interactive_repo.poll_tally, poll_id=poll.id))
            miscounted += sum(tally.values()) != voters
            await registry.call(channel, polls.EndPoll(poll.id))
        nursery.cancel_scope.cancel()
    await database.close()
    ordered = sorted(latencies)
    return {
        "votes": float(len(latencies)),
        "seconds": elapsed,
        "votes_per_second": len(latencies) / elapsed,
        "p50_ms": percentile(ordered, 50) * 1000,
        "p99_ms": percentile(ordered, 99) * 1000,
        "miscounted_polls": float(miscounted),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default=None, help="default: a fresh SQLite file in a temporary directory")
    parser.add_argument("--voters", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="polls voted in, one after another")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{Path(tmp) / 'poll-bench.db'}"
        result = trio.run(run, url, args.voters, args.rounds)
    print(
        f"{int(result['votes'])} votes in {result['seconds']:.2f} s: {result['votes_per_second']:.0f} votes/s "
        f"(p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms), every vote committed before its answer"
    )
    if result["miscounted_polls"]:
        print(f"NOT met: {int(result['miscounted_polls'])} of {args.rounds} polls did not store one vote per voter")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
