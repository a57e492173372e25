"""Webhook delivery: the outbox sink, the dispatcher with its worker pool, and the HTTPS adapter.

    event → OutboxSink (inside the change's transaction) → webhook_deliveries row
          → Dispatcher claims due rows (lease) → worker POSTs → attempt recorded

Protocol decisions (body, signatures, schedule, target policy) are the sans-IO modules in
`volthub.protocol.webhooks`; this module only moves bytes and rows. Every time comes from the hub
clock and every wait from Trio's, so MockClock drives the whole schedule in tests.
"""

from __future__ import annotations

import logging
import ssl
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import httpx
import trio

from volthub.hub.clock import Clock, to_ms
from volthub.hub.publisher import Event
from volthub.persistence import Database, Tx
from volthub.persistence import apps as apps_repo
from volthub.persistence import notifications as notifications_repo
from volthub.persistence import oauth as oauth_repo
from volthub.persistence import webhooks as repo
from volthub.protocol.catalogue import REQUIRED_SCOPE, delivery_name, subscribed_names
from volthub.protocol.webhooks import (
    InvalidTarget,
    Outcome,
    TargetURL,
    check_url,
    classify_response,
    delivery_headers,
    encode_delivery_body,
    next_attempt_at,
    resolve_and_check,
    should_disable,
)

log = logging.getLogger(__name__)

USER_AGENT = "volthub-webhooks/1"
# A response body is read up to this many bytes (so the connection can be reused), then dropped.
MAX_RESPONSE_BYTES = 64 * 1024
# A claim outlives the attempt's timeout by this much before another worker may take it.
LEASE_GRACE_SECONDS = 5.0
# Shortest wait when due rows exist but none could be claimed (another process holds them).
MIN_IDLE_WAIT = 0.05
PRUNE_EVERY_SECONDS = 3600.0
MAX_ERROR_TEXT = 500

Resolver = Callable[..., Awaitable[Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]]


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


# --------------------------------------------------------------------------- outbox sink


ScopeCheck = Callable[[Tx, str, str, str], bool]


def app_holds_scope(tx: Tx, user_id: str, client_id: str, scope: str) -> bool:
    """Whether `user_id` has an active OAuth grant giving `client_id` this scope."""
    return oauth_repo.grant_has_scope(tx, user_id, client_id, scope)


def event_time_ms(event: Event) -> int:
    """The emitting transaction's time, from the event's own ISO 8601 timestamp.

    The sink runs on a database worker thread, where the Trio-driven clock cannot be read.
    """
    return round(datetime.fromisoformat(event.timestamp).timestamp() * 1000)


class OutboxSink:
    """`EventPublisher` transaction sink: writes one delivery row per (event, webhook) that
    wants it, in the same transaction as the change. Sandbox events never get here."""

    def __init__(self, first_delay: float, scope_check: ScopeCheck = app_holds_scope) -> None:
        self._first_delay_ms = to_ms(first_delay)
        self._scope_check = scope_check
        self._lock = threading.Lock()
        # Ids of events that got rows, so the post-commit bus listener wakes the workers
        # only for them (a rolled-back id just lingers until the set is trimmed).
        self._enqueued: set[str] = set()

    def __call__(self, tx: Tx, events: list[Event]) -> None:
        relevant = [e for e in events if not e.is_test and subscribed_names(e.name)]
        if not relevant:
            return
        by_owner: dict[str, list[repo.Subscriber]] = {}
        for subscriber in repo.subscribers(tx, {e.channel_id for e in relevant}):
            by_owner.setdefault(subscriber.owner_id, []).append(subscriber)
        rows: list[repo.NewDelivery] = []
        for event in relevant:
            rows += self._deliveries(tx, event, by_owner.get(event.channel_id, []))
        if not rows:
            return
        repo.enqueue(tx, rows, event_time_ms(relevant[0]))
        with self._lock:
            if len(self._enqueued) > 100_000:
                self._enqueued.clear()
            self._enqueued.update(row.event_id for row in rows)

    def _deliveries(self, tx: Tx, event: Event, subscribers: list[repo.Subscriber]) -> list[repo.NewDelivery]:
        rows = []
        at = event_time_ms(event)
        for subscriber in subscribers:
            name = delivery_name(event.name, subscriber.events)
            if name is None:
                continue
            scope = REQUIRED_SCOPE.get(event.name)
            if scope and not self._scope_check(tx, subscriber.owner_id, subscriber.client_id, scope):
                continue
            body = encode_delivery_body(event.id, name, event.timestamp, event.data)
            rows.append(
                repo.NewDelivery(
                    str(uuid.uuid4()), subscriber.webhook_id, event.id, name, body, at + self._first_delay_ms
                )
            )
        return rows

    def take(self, event_id: str) -> bool:
        """True once for an event that got delivery rows (called after its commit)."""
        with self._lock:
            if event_id in self._enqueued:
                self._enqueued.discard(event_id)
                return True
            return False


# --------------------------------------------------------------------------- HTTPS adapter


@dataclass(frozen=True)
class AttemptResult:
    status: int | None
    error: str | None
    headers: dict[str, str]
    latency_ms: int


def make_ssl_context(ca_file: str) -> ssl.SSLContext:
    """The system trust store plus `[webhooks] ca_file` (httpx 0.28 wants a context, DESIGN §7)."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


class _PooledClient:
    def __init__(self, client: httpx.AsyncClient, now: float) -> None:
        self.client = client
        self.users = 0
        self.last_used = now


class Deliverer:
    """POSTs one attempt to a checked address.

    The host is resolved once per attempt and checked against the address policy; the
    request then goes to that IP, with the Host header and TLS SNI/verification of the
    name (httpx's `sni_hostname` extension), so a second DNS answer can never redirect it.
    Keep-alive connections are pooled per (name, port, IP): a connection verified for one
    name is never reused for another.
    """

    def __init__(
        self,
        *,
        timeout: float,
        allow_private: bool,
        ssl_context: ssl.SSLContext,
        resolver: Resolver | None = None,
    ) -> None:
        self.timeout = timeout
        self.allow_private = allow_private
        self.ssl_context = ssl_context
        self.resolver: Resolver = resolver or trio.socket.getaddrinfo
        self._clients: dict[tuple[str, int, str], _PooledClient] = {}

    async def check_target(self, url: str) -> TargetURL:
        """The creation-time check: URL rules and where the name resolves now."""
        target = check_url(url, allow_private=self.allow_private)
        with trio.move_on_after(self.timeout):
            await resolve_and_check(target.host, target.port, self.allow_private, self.resolver)
            return target
        raise InvalidTarget("unresolvable_host", f"resolving {target.host} timed out")

    async def attempt(self, url: str, headers: dict[str, str], body: bytes) -> AttemptResult:
        started = trio.current_time()
        status, error, response_headers = None, None, {}
        with trio.move_on_after(self.timeout) as scope:
            try:
                status, response_headers = await self._post(url, headers, body)
            except InvalidTarget as exc:
                error = f"{exc.code}: {exc.message}"
            except (httpx.HTTPError, OSError, ssl.SSLError) as exc:
                error = _describe(exc)
            except Exception as exc:  # recorded, not raised: a retry loop must not spin silently
                log.exception("unexpected error delivering to %s", url)
                error = "internal error: " + _describe(exc)
        if scope.cancelled_caught:
            error = f"timeout: no response within {self.timeout:g} s"
        latency = to_ms(trio.current_time() - started)
        return AttemptResult(status, error, response_headers, latency)

    async def _post(self, url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str]]:
        target = check_url(url, allow_private=self.allow_private)
        addresses = await resolve_and_check(target.host, target.port, self.allow_private, self.resolver)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._post_to(target, address, headers, body)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last_error = exc  # next checked address, as a client walks an A/AAAA list
        assert last_error is not None
        raise last_error

    async def _post_to(
        self, target: TargetURL, address: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str]]:
        shown = f"[{address}]" if ":" in address else address
        request_url = f"https://{shown}:{target.port}{target.target}"
        extensions: dict[str, Any] = {}
        sent = {**headers, "User-Agent": USER_AGENT}
        if target.ip is None:
            extensions["sni_hostname"] = target.host
            sent["Host"] = target.host if target.port == 443 else f"{target.host}:{target.port}"
        pooled = self._client((target.host, target.port, address))
        pooled.users += 1
        try:
            request = pooled.client.build_request(
                "POST", request_url, content=body, headers=sent, extensions=extensions
            )
            response = await pooled.client.send(request, stream=True)
            try:
                read = 0
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read > MAX_RESPONSE_BYTES:
                        break
            finally:
                await response.aclose()
            return response.status_code, dict(response.headers)
        finally:
            pooled.users -= 1
            pooled.last_used = trio.current_time()

    def _client(self, key: tuple[str, int, str]) -> _PooledClient:
        pooled = self._clients.get(key)
        if pooled is None:
            client = httpx.AsyncClient(
                verify=self.ssl_context,
                timeout=httpx.Timeout(self.timeout),
                follow_redirects=False,  # a redirect target was never checked
                trust_env=False,  # never through a proxy: the checked IP is what we reach
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16, keepalive_expiry=30),
            )
            pooled = self._clients[key] = _PooledClient(client, trio.current_time())
        return pooled

    async def close_idle(self, idle_for: float = 60.0) -> None:
        now = trio.current_time()
        for key, pooled in list(self._clients.items()):
            if pooled.users == 0 and now - pooled.last_used >= idle_for:
                del self._clients[key]
                await pooled.client.aclose()

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for pooled in clients.values():
            with trio.CancelScope(shield=True):
                await pooled.client.aclose()


def _describe(exc: BaseException) -> str:
    """Short text for the attempt log. httpx wraps TLS and socket errors with an empty
    message, so the most specific text in the exception chain is used."""
    detail, seen = str(exc), 0
    inner: BaseException | None = exc.__cause__ or exc.__context__
    while inner is not None and seen < 5:
        if isinstance(inner, ssl.SSLError | OSError) and str(inner):
            detail = str(inner)
        inner, seen = inner.__cause__ or inner.__context__, seen + 1
    return f"{type(exc).__name__}: {detail or repr(exc)}"[:MAX_ERROR_TEXT]


# --------------------------------------------------------------------------- dispatcher

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
        recorded = _Result(claim, attempted_at, outcome, result.latency_ms, to_ms(finished))
        assert self._results is not None, "deliver() runs in the workers of run()"
        await self._results.send(recorded)
        await recorded.done.wait()  # the slot stays taken until the outcome is stored

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
                    await self.db.write(lambda tx, batch=batch: [self._record(tx, item) for item in batch])
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

    def _record(self, tx: Tx, result: _Result) -> None:
        claim, outcome, now_ms = result.claim, result.outcome, result.finished_ms
        started = repo.start_recording(tx, claim.delivery_id, claim.token)
        if started is None:
            return  # the webhook was deleted meanwhile
        number, ours, failed_before = started
        kind = "success" if outcome.ok else ("gone" if outcome.disable_now else "failure")
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


# --------------------------------------------------------------------------- wiring


class _Runtime(Protocol):
    """What the app's runtime offers (the hub does not import the http package)."""

    settings: Any
    clock: Clock
    services: dict[str, Any]

    @property
    def db(self) -> Database: ...

    @property
    def events(self) -> Any: ...


async def install(rt: _Runtime) -> None:
    """Start-up hook: the outbox sink on every event-publishing transaction, the wake-up
    listener on the bus, and the dispatcher in `rt.services["webhooks"]`."""
    dispatcher = Dispatcher.from_settings(rt.db, rt.clock, rt.settings.webhooks)
    rt.events.add_transaction_sink(dispatcher.sink)
    rt.events.bus.subscribe(dispatcher.on_event)
    rt.services["webhooks"] = dispatcher


async def service(rt: _Runtime, nursery: trio.Nursery) -> None:
    """The app's supervised nursery runs the dispatcher until shutdown; should it ever
    fail, it is restarted rather than taking the server down (pending rows wait)."""
    while True:
        try:
            await rt.services["webhooks"].run()
        except Exception:
            log.exception("webhook dispatcher failed; restarting in 1 s")
        await trio.sleep(1)
