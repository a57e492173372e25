"""Who a request comes from: the one rule every per-client decision uses (rate limits, the
`/metrics` allow-list, the per-address connection cap, the access log's `client`).

The socket peer, unless the peer is a trusted proxy: then the LAST `X-Forwarded-For` entry,
the one that proxy appended. Earlier entries are whatever the client sent and are never
believed. Pure: the listeners hand in the peer and the request's headers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs (or single addresses) as networks; ValueError naming the first bad entry."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"not an address or CIDR: {entry!r}") from None
    return tuple(networks)


def _address(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address((text or "").strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True)
class TrustedProxies:
    """The peers whose `X-Forwarded-For` is believed: `networks` ([server] trusted_proxies),
    or every peer when `every_peer` ([ratelimit] trust_forwarded_for, the older switch)."""

    networks: tuple[Network, ...] = ()
    every_peer: bool = False

    @classmethod
    def of(cls, entries: Iterable[str], every_peer: bool = False) -> TrustedProxies:
        return cls(parse_networks(entries), every_peer)

    @property
    def any(self) -> bool:
        return self.every_peer or bool(self.networks)

    def trusts(self, peer: str | None) -> bool:
        if self.every_peer:
            return True
        if not self.networks:  # nobody is trusted (the default): no address to parse
            return False
        address = _address(peer)
        return address is not None and any(address in network for network in self.networks)


NOBODY = TrustedProxies()


def client_address(peer: str | None, forwarded_for: str | None, trusted: TrustedProxies) -> str:
    """The address a request is judged by (see the module's docstring); "-" when unknown."""
    if forwarded_for and trusted.trusts(peer):
        last = forwarded_for.rsplit(",", 1)[-1].strip()
        found = _address(last)
        if found is not None:
            return str(found)
    found = _address(peer)
    if found is not None:
        return str(found)
    return peer or "-"


def forwarded_for(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The X-Forwarded-For value; several header lines are one list, in order."""
    values = [value.decode("latin-1") for name, value in headers if name.lower() == b"x-forwarded-for"]
    return ", ".join(values) if values else None


def client_of_scope(scope: dict[str, Any], trusted: TrustedProxies) -> tuple[str, int] | None:
    """An ASGI scope's `client`, as the request is judged: the forwarded client (port 0,
    unknown) when the peer is a trusted proxy that said who it is, else the peer as it is."""
    peer: tuple[str, int] | None = scope.get("client")
    if not trusted.trusts(peer[0] if peer else None):
        return peer
    header = forwarded_for(scope.get("headers", ()))
    if header is None:
        return peer
    address = client_address(peer[0] if peer else None, header, trusted)
    return peer if peer and address == peer[0] else (address, 0)
