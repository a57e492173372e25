"""Who is counted under which key (pure functions of the rate-limit adapter)."""

from __future__ import annotations

import base64

import pytest

from volthub.http.access import FIRST_PARTY, OAUTH, Principal
from volthub.http.ratelimit import BUDGETS, CATEGORIES, basic_client_id, budget_key, client_ip

ALICE_FIRST_PARTY = Principal("alice", FIRST_PARTY)
ALICE_VIA_APP1 = Principal("alice", OAUTH, frozenset({"chat:write"}), "app1", "g1")
ALICE_VIA_APP2 = Principal("alice", OAUTH, frozenset({"chat:write"}), "app2", "g2")
BOB_VIA_APP1 = Principal("bob", OAUTH, frozenset({"chat:write"}), "app1", "g3")


def test_every_category_has_a_budget() -> None:
    assert set(BUDGETS) == set(CATEGORIES)


@pytest.mark.parametrize("category", ["chat_send", "moderation", "roles_write", "interactive"])
def test_developer_writes_are_per_app_and_streamer(category: str) -> None:
    keys = {
        budget_key(category, p, "10.0.0.1") for p in (ALICE_FIRST_PARTY, ALICE_VIA_APP1, ALICE_VIA_APP2, BOB_VIA_APP1)
    }
    assert len(keys) == 4
    # The same token identity from another address spends the same budget.
    assert budget_key(category, ALICE_VIA_APP1, "10.0.0.1") == budget_key(category, ALICE_VIA_APP1, "10.0.0.2")


def test_subscriptions_are_per_client() -> None:
    assert budget_key("subscriptions", ALICE_VIA_APP1, "ip") == budget_key("subscriptions", BOB_VIA_APP1, "ip")
    assert budget_key("subscriptions", ALICE_VIA_APP1, "ip") != budget_key("subscriptions", ALICE_VIA_APP2, "ip")


def test_app_creation_is_per_user_whatever_the_token() -> None:
    assert budget_key("app_create", ALICE_FIRST_PARTY, "a") == budget_key("app_create", ALICE_VIA_APP1, "b")


def test_without_a_caller_the_ip_is_the_key() -> None:
    assert budget_key("chat_send", None, "10.0.0.1") != budget_key("chat_send", None, "10.0.0.2")
    assert budget_key("chat_send", None, "10.0.0.1") != budget_key("moderation", None, "10.0.0.1")


def test_token_key_is_client_id_and_ip_with_a_bounded_client_id() -> None:
    assert budget_key("token", None, "ip1", "app1") != budget_key("token", None, "ip2", "app1")
    assert budget_key("token", None, "ip1", "app1") != budget_key("token", None, "ip1", "app2")
    huge = budget_key("token", None, "ip1", "x" * 100_000)
    assert len(repr(huge)) < 200


@pytest.mark.parametrize(
    ("peer", "expected"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::9", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        (None, "unknown"),
        ("not an address", "not an address"),
    ],
)
def test_client_ip_counts_ipv6_per_64(peer: str | None, expected: str) -> None:
    assert client_ip(peer) == expected


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (_basic("app1:secret"), "app1"),
        (_basic("my%3Aapp:secret"), "my:app"),  # RFC 6749 §2.3.1 form-encodes the id
        (_basic("no-colon"), None),
        (_basic(":secret"), None),
        ("Basic !!!", None),
        ("Bearer abc", None),
        (None, None),
    ],
)
def test_basic_client_id(header: str | None, expected: str | None) -> None:
    assert basic_client_id(header) == expected
