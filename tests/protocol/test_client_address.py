"""The one rule for a request's client address: the peer, unless the peer is a trusted proxy,
then the last X-Forwarded-For entry (the one that proxy appended)."""

from __future__ import annotations

import pytest

from volthub.protocol.client_address import NOBODY, TrustedProxies, client_address, client_of_scope, forwarded_for

PROXY = TrustedProxies.of(["10.0.0.0/8", "::1"])


def test_an_untrusted_peer_is_its_own_client_whatever_it_forwards() -> None:
    assert client_address("192.0.2.7", "198.51.100.1", PROXY) == "192.0.2.7"
    assert client_address("192.0.2.7", "198.51.100.1", NOBODY) == "192.0.2.7"


def test_a_trusted_proxy_is_judged_by_the_last_forwarded_entry() -> None:
    assert client_address("10.1.2.3", "6.6.6.6, 198.51.100.1", PROXY) == "198.51.100.1"
    assert client_address("::1", "2001:db8::5", PROXY) == "2001:db8::5"
    assert client_address("::ffff:10.0.0.1", "198.51.100.2", PROXY) == "198.51.100.2"


@pytest.mark.parametrize("header", [None, "", "6.6.6.6, not-an-address", "6.6.6.6,"])
def test_a_trusted_proxy_without_a_usable_last_entry_is_the_client(header: str | None) -> None:
    assert client_address("10.0.0.1", header, PROXY) == "10.0.0.1"


def test_trust_forwarded_for_trusts_every_peer() -> None:
    every = TrustedProxies.of([], every_peer=True)
    assert client_address("192.0.2.7", "198.51.100.1", every) == "198.51.100.1"


def test_a_bad_entry_is_named() -> None:
    with pytest.raises(ValueError, match="'10.0.0.300'"):
        TrustedProxies.of(["10.0.0.0/8", "10.0.0.300"])


def test_several_header_lines_are_one_list() -> None:
    headers = [(b"x-forwarded-for", b"6.6.6.6"), (b"host", b"x"), (b"X-Forwarded-For", b"198.51.100.1")]
    assert forwarded_for(headers) == "6.6.6.6, 198.51.100.1"
    assert forwarded_for([(b"host", b"x")]) is None


def test_a_scope_keeps_its_peer_unless_a_trusted_proxy_forwarded_a_client() -> None:
    direct = {"client": ("192.0.2.7", 5000), "headers": [(b"x-forwarded-for", b"198.51.100.1")]}
    assert client_of_scope(direct, PROXY) == ("192.0.2.7", 5000)
    unnamed = {"client": ("10.0.0.1", 5000), "headers": []}
    assert client_of_scope(unnamed, PROXY) == ("10.0.0.1", 5000)
    proxied = {"client": ("10.0.0.1", 5000), "headers": [(b"x-forwarded-for", b"198.51.100.1")]}
    assert client_of_scope(proxied, PROXY) == ("198.51.100.1", 0)
