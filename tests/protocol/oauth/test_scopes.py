from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.oauth.scopes import (
    ALIASES,
    CATEGORIES,
    SCOPE_NAMES,
    SCOPES,
    SENSITIVE_SCOPES,
    InvalidScope,
    ScopeRequest,
    catalogue_document,
    effective_scopes,
    format_scope,
    group_for_consent,
    has_scope,
    parse_scope,
)

# The product's scope table, in its order (23 strings).
SPEC_TABLE = [
    "chat:read", "chat:write", "chat:moderate",
    "stream:read", "stream:write", "stream:key",
    "channel:read", "channel:interactive:write", "channel:roles:write",
    "subscriptions:read", "subscriptions:write",
    "user:write",
    "notifications:read", "notifications:write",
    "payments:read", "payments:write",
    "points:read", "points:write",
    "journal:read", "journal:write",
    "extvideo:read", "extvideo:manage",
    "bot:write",
]  # fmt: skip
LEGACY = ["user:profile:read", "streams:read", "streams:key:read", "streams:write", "streams:telemetry", "bot:read"]


# --- catalogue -------------------------------------------------------------------------


def test_catalogue_is_the_spec_table_in_order() -> None:
    assert list(SCOPE_NAMES) == SPEC_TABLE
    assert len(SCOPES) == 23


def test_exactly_the_five_designated_scopes_are_sensitive() -> None:
    assert {
        "stream:key",
        "chat:moderate",
        "channel:roles:write",
        "channel:interactive:write",
        "payments:write",
    } == SENSITIVE_SCOPES
    assert {s.name for s in SCOPES if s.sensitive} == SENSITIVE_SCOPES


def test_every_scope_has_category_and_description() -> None:
    for s in SCOPES:
        assert s.category in CATEGORIES
        assert s.description.strip() and s.description.endswith(".")


def test_categories_group_contiguously() -> None:
    # Catalogue order keeps each category together, so grouping never reorders scopes.
    seen: list[str] = []
    for s in SCOPES:
        if not seen or seen[-1] != s.category:
            assert s.category not in seen
            seen.append(s.category)
    assert tuple(seen) == CATEGORIES


def test_aliases_are_the_legacy_names_and_grant_real_scopes() -> None:
    # What each one grants: test_effective_expands_aliases.
    assert set(LEGACY) == set(ALIASES)
    assert not set(ALIASES) & set(SCOPE_NAMES)
    assert {granted for granted in ALIASES.values() if granted is not None} <= set(SCOPE_NAMES)


def test_catalogue_document_shape_and_json() -> None:
    doc = catalogue_document()
    assert set(doc) == {"scopes", "aliases"}
    assert [s["name"] for s in doc["scopes"]] == SPEC_TABLE
    for item in doc["scopes"]:
        assert set(item) == {"name", "category", "description", "sensitive"}
        assert isinstance(item["sensitive"], bool)
    assert doc["aliases"]["user:profile:read"] is None
    assert '"user:profile:read": null' in json.dumps(doc)


def test_catalogue_document_is_a_fresh_copy() -> None:
    doc = catalogue_document()
    doc["scopes"].clear()
    doc["aliases"]["x"] = "y"
    assert len(catalogue_document()["scopes"]) == 23
    assert "x" not in ALIASES


# --- parse_scope -----------------------------------------------------------------------


def test_parse_keeps_order_and_dedupes() -> None:
    req = parse_scope("chat:write chat:read chat:write")
    assert req == ScopeRequest(("chat:write", "chat:read"))


def test_parse_tolerates_repeated_leading_and_trailing_spaces() -> None:
    assert parse_scope("  chat:read    stream:read ").requested == ("chat:read", "stream:read")


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_parse_empty(raw: str | None) -> None:
    req = parse_scope(raw)
    assert req.is_empty and req.effective == frozenset() and str(req) == ""


def test_parse_accepts_every_catalogue_scope_and_alias() -> None:
    req = parse_scope(" ".join(SPEC_TABLE + LEGACY))
    assert req.requested == tuple(SPEC_TABLE + LEGACY)
    assert req.effective == frozenset(SPEC_TABLE)
    assert req.legacy == tuple(LEGACY)


@pytest.mark.parametrize(
    "token",
    [
        "Chat:read",  # case-sensitive
        "CHAT:READ",
        "chat",  # no prefix matching
        "chat:",
        "chat:*",  # no wildcards
        "*",
        "chat:read:extra",
        "stream",
        "streams",
        "user:profile",
        "chat:read\tstream:read",  # only the space separates
        "chat:read\n",
        "chat:read,stream:read",
        "chat%3Aread",
        "ｃhat:read",
    ],
)
def test_parse_is_literal(token: str) -> None:
    with pytest.raises(InvalidScope) as info:
        parse_scope(f"chat:write {token}")
    assert info.value.unknown == [token]
    assert info.value.error == "invalid_scope"


def test_invalid_scope_lists_all_unknown_once_in_order() -> None:
    with pytest.raises(InvalidScope) as info:
        parse_scope("b chat:read a b c a")
    assert info.value.unknown == ["b", "a", "c"]
    assert isinstance(info.value, ValueError)


def test_invalid_scope_message_is_bounded() -> None:
    raw = " ".join(f"x{i}" * 100 for i in range(1000))
    with pytest.raises(InvalidScope) as info:
        parse_scope(raw)
    assert len(info.value.unknown) == 1000
    assert len(str(info.value)) < 600
    assert "995 more" in str(info.value)


def test_scope_request_sensitive_in_catalogue_order() -> None:
    req = parse_scope("payments:write chat:read streams:key:read chat:moderate")
    assert req.sensitive == ("chat:moderate", "stream:key", "payments:write")


_scope_tokens = st.sampled_from(SPEC_TABLE + LEGACY)


@given(st.text())
def test_parse_random_text_raises_only_invalid_scope(raw: str) -> None:
    try:
        req = parse_scope(raw)
    except InvalidScope as exc:
        assert exc.unknown and all(u not in SPEC_TABLE and u not in ALIASES for u in exc.unknown)
    else:
        assert all(t in SPEC_TABLE or t in ALIASES for t in req.requested)


@given(st.lists(st.one_of(_scope_tokens, st.text(alphabet="abc:*", min_size=1))), st.integers(1, 4))
def test_parse_mixed_lists(tokens: list[str], gap: int) -> None:
    raw = (" " * gap).join(tokens)
    unknown = [t for t in dict.fromkeys(tokens) if t not in SPEC_TABLE and t not in ALIASES]
    if unknown:
        with pytest.raises(InvalidScope) as info:
            parse_scope(raw)
        assert info.value.unknown == unknown
    else:
        assert parse_scope(raw).requested == tuple(dict.fromkeys(tokens))


@given(st.lists(_scope_tokens))
def test_format_then_parse_roundtrip(tokens: list[str]) -> None:
    formatted = format_scope(tokens)
    req = parse_scope(formatted)
    assert set(req.requested) == set(tokens)
    assert format_scope(req.requested) == formatted  # canonical form is a fixed point


# --- effective_scopes / has_scope --------------------------------------------------------


def test_effective_expands_aliases() -> None:
    assert effective_scopes(["streams:read", "streams:telemetry"]) == {"stream:read"}
    assert effective_scopes(["streams:write"]) == {"stream:write"}
    assert effective_scopes(["streams:key:read"]) == {"stream:key"}
    assert effective_scopes(["bot:read"]) == {"channel:read"}
    assert effective_scopes(["user:profile:read"]) == frozenset()


def test_effective_ignores_unknown_and_accepts_a_scope_string() -> None:
    assert effective_scopes(["chat:read", "nope", "Chat:write"]) == {"chat:read"}
    assert effective_scopes("chat:read  streams:write") == {"chat:read", "stream:write"}


def test_has_scope_literal_after_expansion() -> None:
    assert has_scope(["streams:key:read"], "stream:key")
    assert has_scope("bot:read", "channel:read")
    assert not has_scope(["stream:read"], "stream:write")
    assert not has_scope(["stream:write"], "stream:read")  # write does not imply read
    assert not has_scope(["channel:read"], "channel:roles:write")
    assert not has_scope(["user:profile:read"], "user:write")
    assert not has_scope([], "chat:read")


@pytest.mark.parametrize("required", ["streams:read", "chat", "Chat:read", ""])
def test_has_scope_rejects_non_catalogue_requirement(required: str) -> None:
    with pytest.raises(ValueError):
        has_scope(["chat:read"], required)


# --- group_for_consent / format_scope ------------------------------------------------------


def test_group_for_consent_in_catalogue_order() -> None:
    groups = group_for_consent(["bot:write", "chat:moderate", "streams:read", "chat:read", "user:profile:read"])
    assert groups == [
        {
            "category": "Chat",
            "scopes": [
                {"name": "chat:read", "description": SCOPES[0].description, "sensitive": False},
                {"name": "chat:moderate", "description": SCOPES[2].description, "sensitive": True},
            ],
        },
        {
            "category": "Stream",
            "scopes": [{"name": "stream:read", "description": SCOPES[3].description, "sensitive": False}],
        },
        {
            "category": "Bot",
            "scopes": [{"name": "bot:write", "description": SCOPES[-1].description, "sensitive": False}],
        },
    ]


def test_group_for_consent_legacy_shown_once_as_real_scope() -> None:
    groups = group_for_consent(["streams:read", "streams:telemetry", "stream:read"])
    assert [s["name"] for g in groups for s in g["scopes"]] == ["stream:read"]


def test_group_for_consent_empty() -> None:
    assert group_for_consent([]) == []
    assert group_for_consent(["user:profile:read"]) == []


def test_group_for_consent_all() -> None:
    groups = group_for_consent(SPEC_TABLE)
    assert [g["category"] for g in groups] == list(CATEGORIES)
    assert [s["name"] for g in groups for s in g["scopes"]] == SPEC_TABLE


def test_format_scope_canonical_order_keeps_aliases() -> None:
    assert format_scope(["bot:read", "chat:write", "chat:read", "chat:write"]) == "chat:read chat:write bot:read"
    assert format_scope("  payments:write  chat:read ") == "chat:read payments:write"
    assert format_scope([]) == ""


def test_format_scope_rejects_unknown() -> None:
    with pytest.raises(InvalidScope) as info:
        format_scope(["chat:read", "chat:*"])
    assert info.value.unknown == ["chat:*"]
