"""The HTTPS adapter: one POST per attempt, to an address checked against the target policy."""

from __future__ import annotations

import functools
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from volthub.hub.clock import to_ms
from volthub.protocol.webhooks import InvalidTarget, TargetURL, check_url, resolve_and_check

log = logging.getLogger(__name__)

USER_AGENT = "volthub-webhooks/1"
# A response body is read up to this many bytes (so the connection can be reused), then dropped.
MAX_RESPONSE_BYTES = 64 * 1024
MAX_ERROR_TEXT = 500

Resolver = Callable[..., Awaitable[Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]]


@dataclass(frozen=True)
class AttemptResult:
    status: int | None
    error: str | None
    headers: dict[str, str]
    latency_ms: int


def make_ssl_context(ca_file: str) -> ssl.SSLContext:
    """The system trust store plus `[webhooks] ca_file` (httpx 0.28 wants a context).

    One per process and version of the CA file: reading the system store takes ~30 ms, paid
    by every app a process creates (the test suite creates one per test). The context is
    only read once built (httpx uses a given context as it is)."""
    version = None
    if ca_file:
        stat = os.stat(ca_file)
        version = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return _ssl_context(ca_file, version)


@functools.lru_cache(maxsize=16)
def _ssl_context(ca_file: str, version: tuple[int, int, int] | None) -> ssl.SSLContext:
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
        status: int | None = None
        error: str | None = None
        response_headers: dict[str, str] = {}
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
