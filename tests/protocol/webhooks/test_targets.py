"""Target URL validation and the address policy."""

from __future__ import annotations

import ipaddress
import socket

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.webhooks import (
    InvalidTarget,
    check_url,
    choose_addresses,
    classify,
    forbidden_reason,
    resolve_and_check,
)

FORBIDDEN = [
    # loopback and unspecified
    "127.0.0.1",
    "127.255.255.254",
    "::1",
    "0.0.0.0",
    "0.1.2.3",
    "::",
    # RFC 1918 private
    "10.0.0.1",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.0.1",
    "192.168.255.255",
    # carrier-grade NAT
    "100.64.0.1",
    "100.127.255.255",
    # link-local, cloud metadata included
    "169.254.0.1",
    "169.254.169.254",
    "fe80::1",
    "febf:ffff::1",
    # IPv6 unique-local
    "fc00::1",
    "fd12:3456:789a::1",
    "fdff:ffff::1",
    # multicast
    "224.0.0.1",
    "239.255.255.250",
    "ff02::1",
    "ff05::1:3",
    # reserved and broadcast
    "240.0.0.1",
    "250.1.2.3",
    "255.255.255.255",
    "192.0.0.8",
    "192.0.0.170",
    # documentation and benchmarking
    "192.0.2.1",
    "198.51.100.7",
    "203.0.113.9",
    "2001:db8::1",
    "3fff::1",
    "198.18.0.1",
    "198.19.255.255",
    # 6to4 relay anycast, site-local, discard, Teredo, local NAT64, non-2000::/3 space
    "192.88.99.1",
    "fec0::1",
    "100::1",
    "2001::1",
    "2001:0:4136:e378::1",
    "64:ff9b:1::1",
    "4000::1",
    "1::1",
    # IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms of forbidden IPv4 addresses
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:0.0.0.0",
    "::127.0.0.1",
    "::10.0.0.1",
    "64:ff9b::127.0.0.1",
    "64:ff9b::a00:1",
    "64:ff9b::169.254.169.254",
    "2002:7f00:1::",
    "2002:a9fe:a9fe::1",
    "2002:c0a8:101::1",
]

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",
    "100.128.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.167.255.255",
    "192.169.0.0",
    "169.253.255.255",
    "223.255.255.255",
    "11.0.0.1",
    "9.255.255.255",
    "198.17.255.255",
    "198.20.0.0",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:80e::200e",
    # mapped, NAT64 and 6to4 forms of public addresses reach a public host
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize("ip", FORBIDDEN)
def test_forbidden_addresses(ip: str) -> None:
    assert classify(ip) is True
    assert forbidden_reason(ip)


@pytest.mark.parametrize("ip", PUBLIC)
def test_public_addresses(ip: str) -> None:
    assert classify(ip) is False
    assert forbidden_reason(ip) is None


def test_classify_accepts_ipaddress_objects() -> None:
    assert classify(ipaddress.ip_address("10.1.2.3"))
    assert not classify(ipaddress.ip_address("8.8.4.4"))


def test_classify_ignores_scope_id() -> None:
    assert classify("fe80::1%eth0")


def test_reasons_are_specific() -> None:
    assert forbidden_reason("169.254.169.254") == "link-local"
    assert forbidden_reason("255.255.255.255") == "broadcast"
    assert forbidden_reason("100.64.0.1") == "carrier-grade NAT"
    assert forbidden_reason("::ffff:127.0.0.1") == "loopback (embedded in IPv6)"


def test_classify_refuses_garbage() -> None:
    with pytest.raises(ValueError):
        classify("not-an-ip")


@given(st.integers(0, 2**32 - 1))
def test_ipv4_mapped_agrees_with_ipv4(n: int) -> None:
    v4 = ipaddress.IPv4Address(n)
    mapped = ipaddress.IPv6Address("::ffff:" + str(v4))
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | n)
    sixtofour = ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1)
    assert classify(mapped) == classify(v4) == classify(nat64) == classify(sixtofour)


PRIVATE_NETS = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "127.0.0.0/8",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
]


@given(st.sampled_from(PRIVATE_NETS), st.integers(0, 2**128 - 1))
def test_every_address_in_forbidden_networks(net: str, n: int) -> None:
    network = ipaddress.ip_network(net)
    addr = network[n % network.num_addresses]
    assert classify(addr)


# --------------------------------------------------------------------------- check_url


def test_check_url_normalises() -> None:
    t = check_url("https://Hooks.Example.COM/path/x?a=1&b=2")
    assert (t.url, t.host, t.port, t.target, t.ip) == (
        "https://hooks.example.com/path/x?a=1&b=2",
        "hooks.example.com",
        443,
        "/path/x?a=1&b=2",
        None,
    )


@pytest.mark.parametrize(
    "url, host, port, target",
    [
        ("https://example.com", "example.com", 443, "/"),
        ("HTTPS://example.com:8443/x", "example.com", 8443, "/x"),
        ("https://example.com:443/", "example.com", 443, "/"),
        ("https://example.com:/", "example.com", 443, "/"),
        ("https://example.com?q=1", "example.com", 443, "/?q=1"),
        ("https://example.com./", "example.com", 443, "/"),
        ("https://bücher.example/", "xn--bcher-kva.example", 443, "/"),
        ("https://my_host.example.com/", "my_host.example.com", 443, "/"),
        ("https://8.8.8.8/hook", "8.8.8.8", 443, "/hook"),
        ("https://[2606:4700:4700::1111]:9000/", "2606:4700:4700::1111", 9000, "/"),
    ],
)
def test_check_url_accepts(url: str, host: str, port: int, target: str) -> None:
    t = check_url(url)
    assert (t.host, t.port, t.target) == (host, port, target)
    assert t.url.startswith("https://")


def test_check_url_ip_literal_fields() -> None:
    t = check_url("https://[2606:4700:4700::1111]:9000/a")
    assert t.ip == ipaddress.ip_address("2606:4700:4700::1111")
    assert t.url == "https://[2606:4700:4700::1111]:9000/a"


@pytest.mark.parametrize(
    "url, code",
    [
        ("http://example.com/", "https_required"),
        ("ftp://example.com/", "https_required"),
        ("ws://example.com/", "https_required"),
        ("javascript:alert(1)", "https_required"),
        ("example.com/hook", "invalid_url"),
        ("//example.com/hook", "invalid_url"),
        ("https:example.com", "invalid_url"),
        ("https:///path", "missing_host"),
        ("https://:443/", "missing_host"),
        ("https://user:pass@example.com/", "userinfo_not_allowed"),
        ("https://user@example.com/", "userinfo_not_allowed"),
        ("https://example.com@127.0.0.1/", "userinfo_not_allowed"),
        ("https://example.com/#frag", "fragment_not_allowed"),
        ("https://example.com/#", "fragment_not_allowed"),
        ("https://example.com:0/", "invalid_port"),
        ("https://example.com:65536/", "invalid_port"),
        ("https://example.com:99999/", "invalid_port"),
        ("https://example.com:abc/", "invalid_port"),
        ("https://example.com:+443/", "invalid_port"),
        ("https://example.com:443:1/", "invalid_port"),
        ("https://example.com:٤٤٣/", "invalid_port"),
        ("https://exa mple.com/", "invalid_url"),
        ("https://example.com/\r\nX: y", "invalid_url"),
        ("https://example.com\\@evil.com/", "invalid_url"),
        ("https://exa%6dple.com/", "invalid_url"),
        ("https://-bad-.example/", "invalid_url"),
        ("https://a..b/", "invalid_url"),
        ("https://" + "a" * 64 + ".com/", "invalid_url"),
        ("https://[::1/", "invalid_url"),
        ("https://[fe80::1%25eth0]/", "invalid_url"),
        ("https://[not-v6]/", "invalid_url"),
        ("", "invalid_url"),
        ("https://example.com/" + "a" * 2030, "url_too_long"),
    ],
)
def test_check_url_refuses(url: str, code: str) -> None:
    with pytest.raises(InvalidTarget) as info:
        check_url(url)
    assert info.value.code == code
    assert str(info.value)


def test_url_length_boundary() -> None:
    base = "https://example.com/"
    assert check_url(base + "a" * (2048 - len(base)))
    with pytest.raises(InvalidTarget) as info:
        check_url(base + "a" * (2049 - len(base)))
    assert info.value.code == "url_too_long"


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/",
        "https://10.0.0.5:8443/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[::ffff:7f00:1]/",
        "https://[fd00::1]/",
        "https://[fe80::1]/",
        "https://0.0.0.0/",
        "https://localhost/",
        "https://LOCALHOST./",
        "https://api.localhost/",
        "https://127。0。0。1/",  # ideographic full stops become dots under IDNA
    ],
)
def test_check_url_private_literals(url: str) -> None:
    with pytest.raises(InvalidTarget) as info:
        check_url(url)
    assert info.value.code == "private_target"
    # The operator's switch lets them through.
    assert check_url(url, allow_private=True).port in (443, 8443)


@pytest.mark.parametrize(
    "url",
    # Forms inet_aton/getaddrinfo read as 127.0.0.1 or 10.0.0.1: refused outright, so
    # the name is never handed to a resolver that would interpret it.
    [
        "https://127.1/",
        "https://2130706433/",
        "https://0x7f.0.0.1/",
        "https://0x7f000001/",
        "https://017700000001/",
        "https://127.000.000.001/",
        "https://10.1/",
        "https://1.2.3.4.5/",
        "https://example.0x1/",
    ],
)
def test_check_url_refuses_non_canonical_ipv4(url: str) -> None:
    with pytest.raises(InvalidTarget) as info:
        check_url(url, allow_private=True)
    assert info.value.code == "invalid_url"


def test_hostname_is_not_resolved_by_check_url() -> None:
    # A name is only checked once resolved (resolve_and_check), not here.
    assert check_url("https://internal.example/").ip is None


# --------------------------------------------------------------------------- addresses


def test_choose_addresses_public() -> None:
    got = choose_addresses("h.example", ["93.184.216.34", "2606:2800:220:1::", "93.184.216.34"], False)
    assert got == ["93.184.216.34", "2606:2800:220:1::"]


@pytest.mark.parametrize("bad", ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::ffff:192.168.1.1"])
def test_choose_addresses_refuses_if_any_forbidden(bad: str) -> None:
    # One bad record among good ones refuses the whole answer (no silent filtering).
    with pytest.raises(InvalidTarget) as info:
        choose_addresses("h.example", ["8.8.8.8", bad], allow_private=False)
    assert info.value.code == "private_target"
    assert bad in str(info.value) or "h.example" in str(info.value)


def test_choose_addresses_allow_private() -> None:
    assert choose_addresses("h", ["127.0.0.1", "8.8.8.8"], allow_private=True) == [
        "127.0.0.1",
        "8.8.8.8",
    ]


@pytest.mark.parametrize("resolved", [[], ["not-an-ip"]])
def test_choose_addresses_unresolvable(resolved: list[str]) -> None:
    with pytest.raises(InvalidTarget) as info:
        choose_addresses("h.example", resolved, allow_private=True)
    assert info.value.code == "unresolvable_host"


def fake_resolver(answers: dict[str, list[str]], calls: list[tuple] | None = None):
    async def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        if calls is not None:
            calls.append((host, port, type))
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, port, 0, 0) if ":" in a else (a, port),
            )
            for a in answers[host]
        ]

    return getaddrinfo


def run_resolve(host: str, allow_private: bool, answers: dict[str, list[str]], calls=None):
    return trio.run(resolve_and_check, host, 443, allow_private, fake_resolver(answers, calls))


def test_resolve_and_check_public() -> None:
    calls: list[tuple] = []
    got = run_resolve("hooks.example", False, {"hooks.example": ["8.8.8.8", "2001:4860::1"]}, calls)
    assert got == ["8.8.8.8", "2001:4860::1"]
    assert calls == [("hooks.example", 443, socket.SOCK_STREAM)]  # exactly one lookup


def test_resolve_and_check_rebinding_name() -> None:
    with pytest.raises(InvalidTarget) as info:
        run_resolve("rebind.example", False, {"rebind.example": ["8.8.8.8", "127.0.0.1"]})
    assert info.value.code == "private_target"
    assert run_resolve("rebind.example", True, {"rebind.example": ["127.0.0.1"]}) == ["127.0.0.1"]


def test_resolve_and_check_literal_skips_resolver() -> None:
    calls: list[tuple] = []
    assert run_resolve("8.8.8.8", False, {}, calls) == ["8.8.8.8"]
    with pytest.raises(InvalidTarget):
        run_resolve("::1", False, {}, calls)
    assert calls == []


def test_resolve_and_check_resolver_failure() -> None:
    with pytest.raises(InvalidTarget) as info:
        run_resolve("nope.example", False, {})
    assert info.value.code == "unresolvable_host"


def test_invalid_target_carries_code_and_message() -> None:
    err = InvalidTarget("https_required", "use https")
    assert isinstance(err, ValueError)
    assert (err.code, err.message, str(err)) == ("https_required", "use https", "use https")
