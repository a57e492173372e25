"""Webhook target URLs: validation and address policy (sans-IO).

Two checks, because a URL says nothing certain about where a connection goes:

1. :func:`check_url` when a webhook is created or its URL changed: HTTPS only, no
   userinfo or fragment, a sane host and port, and no IP literal in a forbidden range.
2. :func:`choose_addresses` / :func:`resolve_and_check` before every delivery: the
   host's DNS answer is checked, and the delivery connects to exactly the addresses that
   were checked (no second lookup), which is what makes the check DNS-rebinding safe.

"Forbidden" (see :func:`forbidden_reason`) covers everything that is not a public
unicast address. ``allow_private=True`` (``[webhooks] allow_private_targets``) turns the
address policy off for operators who deliver to their own network.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_URL_LENGTH = 2048
DEFAULT_PORT = 443

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Error codes carried by InvalidTarget (the HTTP layer returns them as `error`).
HTTPS_REQUIRED = "https_required"
INVALID_URL = "invalid_url"
URL_TOO_LONG = "url_too_long"
MISSING_HOST = "missing_host"
USERINFO_NOT_ALLOWED = "userinfo_not_allowed"
FRAGMENT_NOT_ALLOWED = "fragment_not_allowed"
INVALID_PORT = "invalid_port"
PRIVATE_TARGET = "private_target"
UNRESOLVABLE_HOST = "unresolvable_host"


class InvalidTarget(ValueError):
    """A webhook target that must not be used; ``code`` is a stable snake_case string."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class TargetURL:
    """A checked target. ``host`` is lower-case ASCII (IDNA), IPv6 without brackets."""

    url: str  # normalised: https://host[:port]/path[?query]
    host: str
    port: int
    target: str  # request target: path and query, at least "/"
    ip: IPAddress | None  # set when the host is an IP literal


# --------------------------------------------------------------------------- ranges

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Why not `ip.is_global`: its tables changed between Python patch releases (3.11.10,
# 3.12.4) and it calls multicast global. An explicit table is stable and testable.
_FORBIDDEN_V4: tuple[tuple[_V4, str], ...] = (
    (_V4("0.0.0.0/8"), "unspecified/this-network"),  # Linux connects 0.0.0.0 to localhost
    (_V4("10.0.0.0/8"), "private"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local"),  # includes cloud metadata 169.254.169.254
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.0.0.0/24"), "IETF protocol assignment"),  # incl. NAT64 discovery .170/.171
    (_V4("192.0.2.0/24"), "documentation"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation"),
    (_V4("203.0.113.0/24"), "documentation"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("255.255.255.255/32"), "broadcast"),  # before 240/4 so the reason is precise
    (_V4("240.0.0.0/4"), "reserved"),
)

_FORBIDDEN_V6: tuple[tuple[_V6, str], ...] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    # IPv4-compatible (deprecated, RFC 4291): no legitimate target lives here.
    (_V6("::/96"), "IPv4-compatible (deprecated)"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64"),  # RFC 8215: site-local by definition
    (_V6("100::/64"), "discard-only"),
    # 2001::/23 holds Teredo (2001::/32), benchmarking, ORCHID, AMT...: tunnels and
    # protocol plumbing, never a webhook receiver.
    (_V6("2001::/23"), "IETF protocol assignment"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("3fff::/20"), "documentation"),  # RFC 9637
    (_V6("fc00::/7"), "unique-local (private)"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local (deprecated)"),
    (_V6("ff00::/8"), "multicast"),
)

_GLOBAL_UNICAST_V6 = _V6("2000::/3")
_MAPPED = _V6("::ffff:0:0/96")
_NAT64 = _V6("64:ff9b::/96")
_SIXTOFOUR = _V6("2002::/16")


def _parse_ip(ip: str | IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return ip
    return ipaddress.ip_address(ip)


def forbidden_reason(ip: str | IPAddress) -> str | None:
    """Why ``ip`` must not be a webhook target, or None for a public unicast address."""
    addr = _parse_ip(ip)
    if isinstance(addr, ipaddress.IPv4Address):
        return _reason_v4(addr)
    return _reason_v6(addr)


def classify(ip: str | IPAddress) -> bool:
    """True when ``ip`` is forbidden as a webhook target (see :func:`forbidden_reason`)."""
    return forbidden_reason(ip) is not None


def _reason_v4(addr: ipaddress.IPv4Address) -> str | None:
    for network, reason in _FORBIDDEN_V4:
        if addr in network:
            return reason
    return None


def _reason_v6(addr: ipaddress.IPv6Address) -> str | None:
    addr = ipaddress.IPv6Address(addr.packed)  # drop any %scope: membership ignores it
    embedded = _embedded_v4(addr)
    if embedded is not None:
        # The packet really goes to the IPv4 address (dual-stack socket, NAT64 or
        # 6to4 gateway), so the IPv4 policy decides.
        inner = _reason_v4(embedded)
        return None if inner is None else f"{inner} (embedded in IPv6)"
    for network, reason in _FORBIDDEN_V6:
        if addr in network:
            return reason
    if addr not in _GLOBAL_UNICAST_V6:
        return "reserved"
    return None


def _embedded_v4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if addr in _MAPPED:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(addr.packed[-4:])
    if addr in _SIXTOFOUR:
        return addr.sixtofour
    return None


# --------------------------------------------------------------------------- URLs

# Anything a parser might read differently from the resolver or the HTTP client:
# whitespace and controls (request smuggling, "https://a b"), backslash (browsers and
# WHATWG treat it as "/", urllib does not).
_UNSAFE_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")
# The last label decides, as in the WHATWG URL parser: "127.1", "0x7f.1" and
# "2130706433" are IPv4 to inet_aton/getaddrinfo, whatever they look like.
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")


def check_url(url: str, *, allow_private: bool = False) -> TargetURL:
    """Validate a webhook target URL; raise :class:`InvalidTarget` with a code.

    Codes: ``url_too_long``, ``invalid_url``, ``https_required``, ``userinfo_not_allowed``,
    ``fragment_not_allowed``, ``missing_host``, ``invalid_port``, ``private_target``
    (an IP literal in a forbidden range; hostnames are checked when resolved).
    """
    if not isinstance(url, str) or not url:
        raise InvalidTarget(INVALID_URL, "the URL must be a non-empty string")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidTarget(URL_TOO_LONG, f"the URL is longer than {MAX_URL_LENGTH} characters")
    if _UNSAFE_CHARS.search(url):
        raise InvalidTarget(INVALID_URL, "the URL contains whitespace, control characters or '\\'")
    rest = _strip_scheme(url)
    if "#" in rest:
        raise InvalidTarget(FRAGMENT_NOT_ALLOWED, "the URL must not contain a fragment ('#')")
    authority, target = _split_authority(rest)
    raw_host, port = _split_host_port(authority)
    host, ip = _check_host(raw_host, allow_private)
    return TargetURL(url=_rebuild(host, ip, port, target), host=host, port=port, target=target, ip=ip)


def _strip_scheme(url: str) -> str:
    match = _SCHEME.match(url)
    if match is None:
        raise InvalidTarget(INVALID_URL, "the URL has no scheme; use https://")
    if match.group(1).lower() != "https":
        raise InvalidTarget(HTTPS_REQUIRED, "webhook URLs must use https://")
    rest = url[match.end() :]
    if not rest.startswith("//"):
        raise InvalidTarget(INVALID_URL, "expected '//' after 'https:'")
    return rest[2:]


def _split_authority(rest: str) -> tuple[str, str]:
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, target = rest[:cut], rest[cut:]
    if "@" in authority:
        raise InvalidTarget(USERINFO_NOT_ALLOWED, "credentials in the URL are not allowed")
    if not target.startswith("/"):
        target = "/" + target  # "https://h?q" requests "/?q"
    return authority, target


def _split_host_port(authority: str) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise InvalidTarget(INVALID_URL, "unterminated '[' in the host")
        host, after = authority[: end + 1], authority[end + 1 :]
    else:
        host, colon, port_text = authority.partition(":")
        after = colon + port_text
    if not host:
        raise InvalidTarget(MISSING_HOST, "the URL has no host")
    return host, _parse_port(after)


def _parse_port(after: str) -> int:
    if after in ("", ":"):  # RFC 3986 allows an empty port: the default
        return DEFAULT_PORT
    text = after[1:] if after.startswith(":") else None
    if text is None or not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise InvalidTarget(INVALID_PORT, f"invalid port {after!r}: use 1 to 65535")
    return int(text)


def _check_host(host: str, allow_private: bool) -> tuple[str, IPAddress | None]:
    """(ASCII host, IP literal or None); IP literals are checked against the policy."""
    if host.startswith("["):
        ip: IPAddress | None = _ipv6_literal(host)
        name = str(ip)
    else:
        # IDNA first: "127。0。0。1" (ideographic full stops) becomes "127.0.0.1" here,
        # so the IP-literal test below sees what the resolver will see.
        name = _to_ascii(host)
        ip = _ipv4_literal(name)
        if ip is None:
            _check_hostname(name, allow_private)
    if ip is not None and not allow_private:
        reason = forbidden_reason(ip)
        if reason is not None:
            raise InvalidTarget(PRIVATE_TARGET, f"{ip} is a {reason} address")
    return name, ip


def _ipv6_literal(host: str) -> ipaddress.IPv6Address:
    try:
        ip = ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        raise InvalidTarget(INVALID_URL, f"invalid IPv6 literal {host}") from None
    if ip.scope_id is not None:
        raise InvalidTarget(INVALID_URL, "IPv6 zone identifiers are not allowed")
    return ip


def _ipv4_literal(name: str) -> ipaddress.IPv4Address | None:
    if not _NUMERIC_LABEL.fullmatch(name.rsplit(".", 1)[-1]):
        return None
    try:
        return ipaddress.IPv4Address(name)  # only the canonical dotted quad
    except ValueError:
        raise InvalidTarget(INVALID_URL, f"{name!r} is not a valid hostname or dotted-quad IPv4 address") from None


def _to_ascii(host: str) -> str:
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise InvalidTarget(INVALID_URL, f"invalid hostname {host!r}") from None
    # One trailing dot (fully qualified) names the same host; drop it so policy and
    # the Host header see one spelling.
    return ascii_host[:-1] if ascii_host.endswith(".") else ascii_host


def _check_hostname(name: str, allow_private: bool) -> None:
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidTarget(INVALID_URL, f"invalid hostname {name!r}")
    # RFC 6761: "localhost" and names under it are loopback by definition; refusing
    # them here gives the owner an error at creation rather than at first delivery.
    if not allow_private and labels[-1] == "localhost":
        raise InvalidTarget(PRIVATE_TARGET, f"{name} is a loopback name")


def _rebuild(host: str, ip: IPAddress | None, port: int, target: str) -> str:
    shown = f"[{host}]" if isinstance(ip, ipaddress.IPv6Address) else host
    port_part = "" if port == DEFAULT_PORT else f":{port}"
    return f"https://{shown}{port_part}{target}"


# --------------------------------------------------------------------------- addresses


def choose_addresses(host: str, resolved: Sequence[str], allow_private: bool) -> list[str]:
    """The addresses a delivery may connect to, from one resolver answer for ``host``.

    Refuses (``private_target``) when ANY address is forbidden, rather than dropping the
    bad ones: a mixed public/private answer is what a rebinding or SSRF attempt looks
    like, and filtering would make delivery depend on which records a resolver happened
    to return this time. Safety against rebinding comes from the caller connecting only
    to the returned addresses, never resolving the name a second time.
    """
    addresses = _unique_addresses(host, resolved)
    if not allow_private:
        for addr in addresses:
            reason = forbidden_reason(addr)
            if reason is not None:
                raise InvalidTarget(PRIVATE_TARGET, f"{host} resolves to {addr}, a {reason} address")
    return [str(a) for a in addresses]


def _unique_addresses(host: str, resolved: Sequence[str]) -> list[IPAddress]:
    seen: dict[IPAddress, None] = {}
    for text in resolved:
        try:
            seen.setdefault(_parse_ip(text), None)
        except ValueError:
            raise InvalidTarget(UNRESOLVABLE_HOST, f"{host} resolved to a non-address {text!r}") from None
    if not seen:
        raise InvalidTarget(UNRESOLVABLE_HOST, f"{host} did not resolve to any address")
    return list(seen)


GetAddrInfo = Callable[..., Awaitable[Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]]


async def resolve_and_check(host: str, port: int, allow_private: bool, getaddrinfo: GetAddrInfo) -> list[str]:
    """Resolve ``host`` once with ``getaddrinfo`` (e.g. ``trio.socket.getaddrinfo``) and
    apply :func:`choose_addresses`. An IP literal is checked without a lookup."""
    literal = _literal_or_none(host)
    if literal is not None:
        return choose_addresses(host, [str(literal)], allow_private)
    try:
        infos = await getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:  # socket.gaierror is an OSError
        raise InvalidTarget(UNRESOLVABLE_HOST, f"cannot resolve {host}: {exc}") from None
    return choose_addresses(host, [info[4][0] for info in infos], allow_private)


def _literal_or_none(host: str) -> IPAddress | None:
    try:
        return _parse_ip(host.strip("[]"))
    except ValueError:
        return None
