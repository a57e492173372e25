"""The loopback guard and the targets' request shapes."""

from __future__ import annotations

import pytest

from volthub.loadtest.targets import Channel, RemoteTargetRefused, check_url, is_loopback, make_target


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("http://127.3.4.5:9000/", ("127.3.4.5", 9000)),
        ("http://localhost", ("localhost", 80)),
        ("http://[::1]:8080", ("::1", 8080)),
        ("https://LOCALHOST:8443", ("localhost", 8443)),
    ],
)
def test_loopback_urls_are_accepted(url: str, expected: tuple[str, int]) -> None:
    assert check_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5:8080",
        "http://192.168.1.2",
        "http://172.16.0.1",
        "http://8.8.8.8",
        "http://example.com",
        "http://localhost.example.com",
        "http://127.0.0.1.nip.io",
        "http://[::2]:80",
        "http://0.0.0.0:8080",
    ],
)
def test_everything_else_needs_allow_remote(url: str) -> None:
    with pytest.raises(RemoteTargetRefused, match="--allow-remote"):
        check_url(url)
    assert check_url(url, allow_remote=True)[0]


@pytest.mark.parametrize("url", ["ws://127.0.0.1:8080", "127.0.0.1:8080", "http://:8080"])
def test_malformed_urls(url: str) -> None:
    with pytest.raises(ValueError):
        check_url(url)


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("10.1.1.1") and not is_loopback("my-host")


def test_publish_requests() -> None:
    channel = Channel(0, "c0ffee00-0000-4000-8000-000000000000", "tok")
    url, body, headers = make_target("volthub", "http://127.0.0.1:8080/").publish(channel, "hi")
    assert (
        url
        == "http://127.0.0.1:8080/api/integrations/oauth/chat/channels/c0ffee00-0000-4000-8000-000000000000/messages"
    )
    assert body == {"message": "hi"} and headers == {"Authorization": "Bearer tok"}
    url, body, headers = make_target("node", "http://127.0.0.1:9002").publish(Channel(1, "room", "room"), "hi")
    assert (url, body, headers) == ("http://127.0.0.1:9002/publish", {"channel": "room", "message": "hi"}, {})
    with pytest.raises(ValueError):
        make_target("nginx", "http://127.0.0.1")


async def test_references_need_no_provisioning() -> None:
    target = make_target("python-socketio", "http://127.0.0.1:9001")
    channels = await target.provision(None, 3, "abc123")  # type: ignore[arg-type] - no HTTP needed
    assert [c.id for c in channels] == ["room_abc123_0", "room_abc123_1", "room_abc123_2"]
    assert all(c.token == c.id for c in channels)


def test_the_gateway_target_is_volthub_with_sockets_and_chat_sends_on_the_gateways_port() -> None:
    target = make_target("volthub-gateway", "http://127.0.0.1:8080/", "http://127.0.0.1:9090")
    assert target.name == "volthub-gateway" and target.supports_sse
    assert (target.base_url, target.socket_url) == ("http://127.0.0.1:8080", "http://127.0.0.1:9090")
    url, _, _ = target.publish(Channel(0, "c1", "tok"), "hi")
    assert url == "http://127.0.0.1:9090/api/integrations/oauth/chat/channels/c1/messages", "chat send's fast path"
    plain = make_target("volthub", "http://127.0.0.1:8080")
    assert plain.socket_url == plain.base_url and plain.name == "volthub"
