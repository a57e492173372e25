"""The dispatcher: claims due deliveries, hands them to a pool of workers, records each attempt."""

from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass, field
from typing import Protocol

import trio

from volthub import metrics
from volthub.hub.clock import Clock, to_ms
from volthub.hub.publisher import Event
from volthub.persistence import Database, Tx
from volthub.persistence import apps as apps_repo
from volthub.persistence import notifications as notifications_repo
from volthub.persistence import webhooks as repo
from volthub.protocol.webhooks import (
    Outcome,
    classify_response,
    delivery_headers,
    next_attempt_at,
    should_disable,
)
from volthub.services.webhooks.client import MAX_ERROR_TEXT, Deliverer, make_ssl_context
from volthub.services.webhooks.direct import TestDelivery, deliver_test, enqueue_test
from volthub.services.webhooks.outbox import OutboxSink

log = logging.getLogger(__name__)

# A claim outlives the attempt's timeout by this much before another worker may take it.
LEASE_GRACE_SECONDS = 5.0
# Shortest wait when due rows exist but none could be claimed (another process holds them).
MIN_IDLE_WAIT = 0.05
PRUNE_EVERY_SECONDS = 3600.0


class WebhookConfig(Protocol):
    """The `[webhooks]` settings this module reads."""

    workers: int
    retry_delays: list[float]
    disable_after_failures: int
    timeout_seconds: float
    allow_private_targets: bool
    ca_file: str
    poll_seconds: float
    log_retention_days: int


# Most attempt outcomes written in one transaction.
RECORD_BATCH = 64


@dataclass
class _Result:
    claim: repo.Claim
    attempted_at: int
    outcome: Outcome
    latency_ms: int
    finished_ms: int
    done: trio.Event = field(default_factory=trio.Event)


class Dispatcher:
    """Claims due deliveries and hands them to a pool of workers.

    One claiming loop per process, batching as many rows as there are idle workers, so a
    claimed row never waits in a queue while its lease runs down. It sleeps until the next
    due time, `poll_seconds` at most (rows other processes wrote), and wakes at once when
    this process commits a delivery row or a worker finishes.
    """

    def __init__(self, database: Database, clock: Clock, config: WebhookConfig, deliverer: Deliverer) -> None:
        self.db = database
        self.clock = clock
        self.config = config
        self.deliverer = deliverer
        self.delays = [float(d) for d in config.retry_delays]
        self.sink = OutboxSink(self.delays[0])
        self._lease_ms = to_ms(config.timeout_seconds + LEASE_GRACE_SECONDS)
        self._slots = trio.Semaphore(config.workers)
        self._poke = trio.Event()
        self._results: trio.MemorySendChannel[_Result] | None = None

    @classmethod
    def from_settings(cls, database: Database, clock: Clock, config: WebhookConfig) -> Dispatcher:
        deliverer = Deliverer(
            timeout=config.timeout_seconds,
            allow_private=config.allow_private_targets,
            ssl_context=make_ssl_context(config.ca_file),
        )
        return cls(database, clock, config, deliverer)

    def wake(self) -> None:
        """Look for due deliveries now (new rows, a re-enabled webhook, a redelivery)."""
        self._poke.set()

    async def deliver_test(self, event: Event, client_id: str | None = None) -> list[TestDelivery]:
        """A test event, once, to the webhooks that want it: signed like a real delivery,
        recorded nowhere (see `volthub.services.webhooks.direct`)."""
        return await deliver_test(self.db, self.clock, self.deliverer, event, client_id)

    async def enqueue_test(self, event: Event, client_id: str | None = None) -> list[str]:
        """A test event queued as real deliveries (logged, retried, redeliverable)."""
        now = self.now_ms()
        queued = await self.db.write(lambda tx: enqueue_test(tx, event, client_id, now))
        if queued:
            self.wake()
        return queued

    def on_event(self, event: Event) -> None:
        """Bus listener: runs after the commit, so the rows are visible to the claim."""
        if self.sink.take(event.id):
            self.wake()

    def now_ms(self) -> int:
        return to_ms(self.clock.now())

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # A slot is a claim in hand, one per worker: a claimed row goes straight to an idle
        # worker and never queues while its lease runs. Fresh if run() restarts.
        self._slots = trio.Semaphore(self.config.workers)
        send, receive = trio.open_memory_channel[repo.Claim](0)
        results_send, results_receive = trio.open_memory_channel[_Result](self.config.workers)
        self._results = results_send
        try:
            async with trio.open_nursery() as nursery:
                for _ in range(self.config.workers):
                    nursery.start_soon(self._worker, receive.clone())
                nursery.start_soon(self._recorder, results_receive)
                nursery.start_soon(self._housekeeping)
                task_status.started()
                async with send:
                    await self._dispatch(send)
        finally:
            await self.deliverer.aclose()

    async def _dispatch(self, send: trio.MemorySendChannel[repo.Claim]) -> None:
        while True:
            await self._slots.acquire()  # an idle worker exists
            self._poke = trio.Event()  # before the claim: a poke during it is not lost
            try:
                claims = await self._claim(1 + self._slots.value)
            except Exception:
                self._slots.release()
                log.exception("claiming webhook deliveries failed")
                await trio.sleep(1)
                continue
            if not claims:
                self._slots.release()
                await self._idle_wait()
                continue
            for index, claim in enumerate(claims):
                if index:
                    self._slots.acquire_nowait()  # counted in the batch size above
                await send.send(claim)

    async def _claim(self, limit: int) -> list[repo.Claim]:
        now = self.now_ms()
        token = uuid.uuid4().hex
        return await self.db.write(lambda tx: repo.claim_due(tx, now, now + self._lease_ms, limit, token))

    async def _idle_wait(self) -> None:
        try:
            due = await self.db.read(repo.next_due_at)
        except Exception:
            log.exception("reading the next webhook due time failed")
            due = None
        wait = self.config.poll_seconds
        if due is not None:
            gap = (due - self.now_ms()) / 1000
            wait = min(wait, gap if gap > 0 else MIN_IDLE_WAIT)
        with trio.move_on_after(wait):
            await self._poke.wait()

    async def _worker(self, receive: trio.MemoryReceiveChannel[repo.Claim]) -> None:
        async with receive:
            async for claim in receive:
                try:
                    await self.deliver(claim)
                except Exception:
                    log.exception("webhook delivery %s failed unexpectedly", claim.delivery_id)
                finally:
                    self._slots.release()
                    self.wake()

    async def deliver(self, claim: repo.Claim) -> None:
        """One attempt of a claimed delivery, and its record."""
        attempted_at = self.now_ms()
        headers = delivery_headers(claim.secret, claim.event_id, claim.event_name, attempted_at, claim.body)
        try:
            result = await self.deliverer.attempt(claim.url, headers, claim.body)
        except trio.Cancelled:
            await self._give_back(claim)
            raise
        finished = self.clock.now()
        outcome = classify_response(result.status, result.error, result.headers, now=finished)
        metrics.WEBHOOK_DELIVERIES.labels(_outcome_label(outcome)).inc()
        recorded = _Result(claim, attempted_at, outcome, result.latency_ms, to_ms(finished))
        assert self._results is not None, "deliver() runs in the workers of run()"
        await self._results.send(recorded)
        await recorded.done.wait()  # the slot stays taken until the outcome is stored

    async def outbox_summary(self) -> tuple[int, float]:
        """(deliveries waiting to be attempted, seconds the oldest of them has waited)."""
        pending, oldest = await self.db.read(repo.outbox_summary)
        age = 0.0 if oldest is None else max(0.0, (self.now_ms() - oldest) / 1000)
        return pending, age

    async def _recorder(self, receive: trio.MemoryReceiveChannel[_Result]) -> None:
        """Group commit: the outcomes of every attempt that finished meanwhile go into one
        transaction (on SQLite each commit is an fsync; this keeps it off the hot path)."""
        async with receive:
            async for first in receive:
                batch = [first]
                while len(batch) < RECORD_BATCH:
                    try:
                        batch.append(receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                try:
                    await self.db.write(functools.partial(self._record_all, batch=batch))
                except Exception:  # the claims lapse and the deliveries are attempted again
                    log.exception("recording %d webhook attempts failed", len(batch))
                finally:
                    for item in batch:
                        item.done.set()

    async def _give_back(self, claim: repo.Claim) -> None:
        """At shutdown, return the claim so the next process need not wait for the lease."""
        with trio.move_on_after(2, shield=True):
            now = self.now_ms()
            await self.db.write(lambda tx: repo.release_claim(tx, claim.delivery_id, claim.token, now))

    def _record_all(self, tx: Tx, batch: list[_Result]) -> None:
        for item in batch:
            self._record(tx, item)

    def _record(self, tx: Tx, result: _Result) -> None:
        claim, outcome, now_ms = result.claim, result.outcome, result.finished_ms
        started = repo.start_recording(tx, claim.delivery_id, claim.token)
        if started is None:
            return  # the webhook was deleted meanwhile
        number, ours, failed_before = started
        kind = _outcome_label(outcome)
        error = None if outcome.ok else outcome.reason[:MAX_ERROR_TEXT]
        repo.insert_attempt(
            tx,
            claim.delivery_id,
            repo.Attempt(number, result.attempted_at, kind, outcome.status, result.latency_ms, error),
        )
        if not ours:
            return  # our lease lapsed and another worker owns the delivery now
        failures = repo.record_webhook_result(tx, claim.webhook_id, outcome.ok)
        if outcome.ok:
            repo.finish_delivery(tx, claim.delivery_id, repo.SUCCEEDED, failed_before, now_ms)
            return
        failed = failed_before + 1
        # Whole milliseconds throughout, so the schedule's offsets come out exact.
        due = next_attempt_at(failed, now_ms / 1000, self.delays, outcome.retry_after, max_failed=len(self.delays))
        if due is None:
            repo.finish_delivery(tx, claim.delivery_id, repo.FAILED, failed, now_ms)
        else:
            repo.reschedule_delivery(tx, claim.delivery_id, failed, to_ms(due), now_ms)
        if outcome.disable_now:
            self._disable(tx, claim, repo.BY_GONE, failures, now_ms)
        elif should_disable(failures, self.config.disable_after_failures):
            self._disable(tx, claim, repo.BY_FAILURES, failures, now_ms)

    def _disable(self, tx: Tx, claim: repo.Claim, reason: str, failures: int, now_ms: int) -> None:
        if not repo.disable_webhook(tx, claim.webhook_id, reason, now_ms):
            return  # already disabled: one notification per disable
        app = apps_repo.get_app(tx, claim.client_id)
        if app is None:
            return
        why = (
            "its endpoint answered 410 Gone"
            if reason == repo.BY_GONE
            else f"{failures} consecutive delivery attempts failed"
        )
        notifications_repo.create(
            tx,
            notification_id=str(uuid.uuid4()),
            user_id=app.owner_id,
            type="webhook.disabled",
            title="Webhook disabled",
            message=f"The webhook {claim.url} of your app {app.name} was disabled because {why}."
            " Pending deliveries are kept; re-enable it to resume them.",
            data={"clientId": claim.client_id, "webhookId": claim.webhook_id, "url": claim.url, "reason": reason},
            now_ms=now_ms,
        )

    async def _housekeeping(self) -> None:
        """Close idle HTTP clients; delete finished deliveries past the retention period."""
        while True:
            await trio.sleep(PRUNE_EVERY_SECONDS)
            try:
                await self.deliverer.close_idle()
                await self.prune()
            except Exception:
                log.exception("webhook housekeeping failed")

    async def prune(self) -> int:
        days = self.config.log_retention_days
        if days <= 0:
            return 0
        before = self.now_ms() - days * 86_400_000
        total = 0
        while True:
            removed = await self.db.write(lambda tx: repo.prune_finished(tx, before))
            total += removed
            if removed < 1000:
                return total


def _outcome_label(outcome: Outcome) -> str:
    """success, failure (retried while attempts remain) or gone (the target asked to stop)."""
    return "success" if outcome.ok else ("gone" if outcome.disable_now else "failure")
