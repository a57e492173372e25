"""Cross-origin requests from browsers (the CORS protocol of the WHATWG Fetch standard),
decided without I/O: which requests are preflights, which origins are allowed, and the
headers each answer carries.

One policy serves every listener: the main port's API paths, the Events API's Engine.IO
paths (on the main port and on the gateway) and the gateway's chat send. Each listener
reads the request's headers, asks :meth:`CorsPolicy.judge`, and either answers a preflight
at once (before authentication and rate limits, which a preflight never carries
credentials for) or adds the headers to whatever it answers, errors included.

Credentials (cookies, HTTP authentication) are never allowed cross-origin: callers send
bearer tokens in `Authorization`, which a preflight lets through like any other header.
So `Access-Control-Allow-Credentials` is never sent and `*` may stand for every origin.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

Headers = list[tuple[bytes, bytes]]

ANY_ORIGIN: Final = "*"
# Paths that answer cross-origin on the main port; everything else (the consent page, the
# developer dashboard, the API reference, /metrics, /healthz) stays same-origin.
CROSS_ORIGIN_PREFIXES: Final = ("/api/", "/.well-known/")
API_METHODS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE")
ENGINEIO_METHODS: Final = ("GET", "POST")
# Response headers a script may read besides the CORS-safelisted ones (Content-Type, ...).
EXPOSED_HEADERS: Final = (
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "Retry-After",
    "X-Request-Id",
)
# How long a browser may reuse a preflight's answer. Chromium caps it at two hours.
MAX_AGE_SECONDS: Final = 7200
# A requested header list longer than this, or not a list of header names, is not echoed
# (the browser then refuses the request it was asking about).
MAX_REQUESTED_HEADERS: Final = 2048
_HEADER_LIST: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*")
_ORIGIN: Final = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#\s@]+")


def answers_cross_origin(path: str) -> bool:
    """Whether the main port answers `path` to other origins (the API and the metadata)."""
    return path.startswith(CROSS_ORIGIN_PREFIXES)


def is_origin(text: str) -> bool:
    """`scheme://host[:port]`, as browsers send it in `Origin` (no path, no trailing slash)."""
    return _ORIGIN.fullmatch(text) is not None


class Kind(enum.Enum):
    """What a listener does with a request."""

    # Not a preflight: serve it as usual and add `Verdict.headers` to the answer.
    SERVE = "serve"
    # A preflight from an allowed origin: answer 204 with `Verdict.headers`, now.
    PREFLIGHT = "preflight"
    # A preflight from an origin that is not allowed: answer 403 with no CORS headers, now.
    REFUSED_PREFLIGHT = "refused_preflight"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    # Headers to send (lower-case names): the whole answer for a preflight, additions otherwise.
    headers: Headers = field(default_factory=list)
    # The request came from an origin that is not allowed (operators count these).
    refused: bool = False
    origin: str | None = None


# Sent with every answer to an allowed origin.
_EXPOSE: Final = (b"access-control-expose-headers", ", ".join(EXPOSED_HEADERS).encode("latin-1"))


@dataclass(frozen=True)
class CorsPolicy:
    """Which origins may call, and with which methods. `origins` holds serialized origins
    (`https://overlay.example`) or `*` for any; empty allows none."""

    origins: frozenset[str]
    methods: tuple[str, ...] = API_METHODS

    @classmethod
    def of(cls, origins: Iterable[str], methods: tuple[str, ...] = API_METHODS) -> CorsPolicy:
        return cls(frozenset(origin.lower() for origin in origins), methods)

    @property
    def any_origin(self) -> bool:
        return ANY_ORIGIN in self.origins

    def allows(self, origin: str) -> bool:
        return self.any_origin or origin.lower() in self.origins

    def judge(self, method: str, headers: Iterable[tuple[bytes, bytes]]) -> Verdict:
        """The verdict on one request, from its method and raw header list."""
        origin = request_method = requested = host = None
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"origin":
                origin = value.decode("latin-1").strip()
            elif lowered == b"access-control-request-method":
                request_method = value.decode("latin-1").strip()
            elif lowered == b"access-control-request-headers":
                requested = value.decode("latin-1").strip()
            elif lowered == b"host":
                host = value.decode("latin-1").strip().lower()
        if method == "OPTIONS" and origin is not None and request_method is not None:
            return self._preflight(origin, requested)
        return self._serve(origin, host)

    def _preflight(self, origin: str, requested: str | None) -> Verdict:
        if not self.allows(origin):
            return Verdict(Kind.REFUSED_PREFLIGHT, [], refused=True, origin=origin)
        headers = self._allow_origin(origin)
        headers.append((b"access-control-allow-methods", ", ".join(self.methods).encode("latin-1")))
        if requested and len(requested) <= MAX_REQUESTED_HEADERS and _HEADER_LIST.fullmatch(requested):
            headers.append((b"access-control-allow-headers", requested.lower().encode("latin-1")))
        headers.append((b"access-control-max-age", str(MAX_AGE_SECONDS).encode("latin-1")))
        # The answer echoes the requested headers, and (with a list of origins) the origin.
        varies = "Access-Control-Request-Headers" if self.any_origin else "Origin, Access-Control-Request-Headers"
        headers.append((b"vary", varies.encode("latin-1")))
        return Verdict(Kind.PREFLIGHT, headers, origin=origin)

    def _serve(self, origin: str | None, host: str | None) -> Verdict:
        if self.any_origin:
            # The same answer for every origin (and for none): caches need no `Vary`.
            return Verdict(Kind.SERVE, self._allow_origin(ANY_ORIGIN), origin=origin)
        headers: Headers = [(b"vary", b"Origin")]
        if origin is None:
            return Verdict(Kind.SERVE, headers)
        if self.allows(origin):
            return Verdict(Kind.SERVE, self._allow_origin(origin) + headers, origin=origin)
        # Browsers send `Origin` on same-origin writes too: those need no CORS headers and
        # are not refusals.
        same_origin = host is not None and origin.lower().partition("://")[2] == host
        return Verdict(Kind.SERVE, headers, refused=not same_origin, origin=origin)

    def _allow_origin(self, origin: str) -> Headers:
        allowed = ANY_ORIGIN if self.any_origin else origin
        return [(b"access-control-allow-origin", allowed.encode("latin-1")), _EXPOSE]


ALLOW_ANY: Final = CorsPolicy.of([ANY_ORIGIN])


def with_headers(headers: Iterable[tuple[bytes, bytes]], added: Headers) -> Headers:
    """A response's headers with `added` joined in; an existing `Vary` is extended, not repeated."""
    merged = list(headers)
    for name, value in added:
        if name == b"vary":
            index = next((i for i, (n, _) in enumerate(merged) if n.lower() == b"vary"), None)
            if index is not None:
                merged[index] = (merged[index][0], merged[index][1] + b", " + value)
                continue
        merged.append((name, value))
    return merged
