"""OAuth scope catalogue, legacy aliases and scope-string parsing (sans-IO).

volthub serves 23 scope strings; ``SCOPES`` below lists them in their canonical order,
used for display and for ``format_scope``.

Scope strings are checked literally: case-sensitive, no wildcards, no prefix
matching — ``chat`` does not imply ``chat:read`` and ``chat:*`` is simply unknown.

Legacy strings from before release 1.5.0 stay valid: they are accepted on
authorize and in stored tokens and expand to the real scope they stand for.
``user:profile:read`` expands to nothing, because reading your own profile needs no scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALIASES",
    "CATEGORIES",
    "SCOPES",
    "SCOPE_NAMES",
    "SENSITIVE_SCOPES",
    "InvalidScope",
    "Scope",
    "ScopeRequest",
    "catalogue_document",
    "effective_scopes",
    "format_scope",
    "group_for_consent",
    "has_scope",
    "parse_scope",
]


@dataclass(frozen=True, slots=True)
class Scope:
    name: str
    category: str
    description: str
    sensitive: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "description": self.description,
            "sensitive": self.sensitive,
        }


# Descriptions are written for the person consenting, not for the developer: they appear
# on the consent page next to each scope.
SCOPES: tuple[Scope, ...] = (
    Scope("chat:read", "Chat", "Read chat messages and chat history in your channel."),
    Scope("chat:write", "Chat", "Send chat messages in your channel as you or your bot."),
    Scope("chat:moderate", "Chat", "Delete messages, time out and ban people in your chat.", True),
    Scope("stream:read", "Stream", "Read your stream info and chat settings."),
    Scope("stream:write", "Stream", "Update your stream info, tags and chat settings."),
    Scope("stream:key", "Stream", "See your stream key and ingest setup, and regenerate your key.", True),
    Scope("channel:read", "Channel", "Read your channel status, roles and interactive status."),
    Scope(
        "channel:interactive:write",
        "Channel",
        "Run polls, predictions, giveaways, goals and timers in your channel.",
        True,
    ),
    Scope("channel:roles:write", "Channel", "Grant and remove VIP and moderator roles in your channel.", True),
    Scope("subscriptions:read", "Subscriptions", "Read your subscriber count and subscriber list."),
    Scope("subscriptions:write", "Subscriptions", "Manage subscriptions on your behalf."),
    Scope("user:write", "Account", "Update your profile and join giveaways as you."),
    Scope("notifications:read", "Notifications", "Read your notifications."),
    Scope("notifications:write", "Notifications", "Mark your notifications as read and manage them."),
    Scope("payments:read", "Payments", "See your Volts wallet balance and history."),
    Scope("payments:write", "Payments", "Send Volts from your wallet.", True),
    Scope("points:read", "Channel points", "Read channel points, rewards and redemptions."),
    Scope("points:write", "Channel points", "Manage channel-point rewards and redemptions."),
    Scope("journal:read", "Journal", "Read your journals."),
    Scope("journal:write", "Journal", "Write and edit your journals."),
    Scope("extvideo:read", "External video", "Read your external video platform integration."),
    Scope("extvideo:manage", "External video", "Manage your external video platform integration."),
    Scope("bot:write", "Bot", "Customise your channel's bot."),
)

_BY_NAME: dict[str, Scope] = {s.name: s for s in SCOPES}
_ORDER: dict[str, int] = {s.name: i for i, s in enumerate(SCOPES)}

SCOPE_NAMES: tuple[str, ...] = tuple(s.name for s in SCOPES)
SENSITIVE_SCOPES: frozenset[str] = frozenset(s.name for s in SCOPES if s.sensitive)
# Category order follows the first appearance of each category in the catalogue.
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(s.category for s in SCOPES))

# Legacy scope string -> the real scope it grants (None: accepted, grants nothing extra).
ALIASES: dict[str, str | None] = {
    "streams:read": "stream:read",
    "streams:telemetry": "stream:read",
    "streams:write": "stream:write",
    "streams:key:read": "stream:key",
    "bot:read": "channel:read",
    "user:profile:read": None,
}
_ALIAS_ORDER: dict[str, int] = {a: len(SCOPES) + i for i, a in enumerate(ALIASES)}


class InvalidScope(ValueError):
    """The scope string names scopes the service does not know (RFC 6749 ``invalid_scope``)."""

    error = "invalid_scope"

    def __init__(self, unknown: Sequence[str]) -> None:
        self.unknown: list[str] = list(unknown)
        super().__init__(_unknown_message(self.unknown))


def _unknown_message(unknown: list[str]) -> str:
    # Bounded: the list comes straight from a request and may be huge or hostile.
    shown = ", ".join(repr(u[:64]) for u in unknown[:5])
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    return f"unknown scope: {shown}{more}"


@dataclass(frozen=True, slots=True)
class ScopeRequest:
    """A parsed scope parameter: what was asked for, deduplicated, in the order sent."""

    requested: tuple[str, ...]

    @property
    def effective(self) -> frozenset[str]:
        """The real scopes granted by ``requested`` once legacy aliases are expanded."""
        return effective_scopes(self.requested)

    @property
    def sensitive(self) -> tuple[str, ...]:
        """Sensitive real scopes in the request, in catalogue order."""
        effective = self.effective
        return tuple(n for n in SCOPE_NAMES if n in effective and n in SENSITIVE_SCOPES)

    @property
    def legacy(self) -> tuple[str, ...]:
        """Legacy alias strings present in the request, in the order sent."""
        return tuple(s for s in self.requested if s in ALIASES)

    @property
    def is_empty(self) -> bool:
        return not self.requested

    def __str__(self) -> str:
        return format_scope(self.requested)


def _split(raw: str) -> list[str]:
    # RFC 6749 §3.3: tokens are separated by single spaces; we tolerate runs of spaces and
    # leading/trailing ones. Other whitespace is not a separator, so "a\tb" is one
    # (unknown) token — the check stays literal.
    return list(dict.fromkeys(t for t in raw.split(" ") if t))


def _is_known(token: str) -> bool:
    return token in _BY_NAME or token in ALIASES


def parse_scope(raw: str | None) -> ScopeRequest:
    """Parse an RFC 6749 space-delimited scope string.

    ``None`` and the empty string give an empty request: RFC 6749 §3.3 lets the server
    either apply a default or refuse, and that choice belongs to the endpoint.
    Raises ``InvalidScope`` listing every unknown token (deduplicated, in order).
    """
    tokens = _split(raw or "")
    unknown = [t for t in tokens if not _is_known(t)]
    if unknown:
        raise InvalidScope(unknown)
    return ScopeRequest(tuple(tokens))


def _as_tokens(scopes: Iterable[str] | str) -> Iterable[str]:
    # A bare string is iterable too (by character); treat it as a scope parameter instead
    # of silently granting nothing.
    return _split(scopes) if isinstance(scopes, str) else scopes


def effective_scopes(granted: Iterable[str] | str) -> frozenset[str]:
    """Real scopes conferred by ``granted``: aliases expanded, unknown strings ignored.

    Unknown strings are dropped rather than raised on: they confer nothing, and a stored
    token must keep working even if it carries a string we no longer recognise.
    """
    real: set[str] = set()
    for token in _as_tokens(granted):
        target = token if token in _BY_NAME else ALIASES.get(token)
        if target is not None:
            real.add(target)
    return frozenset(real)


def has_scope(granted: Iterable[str] | str, required: str) -> bool:
    """Whether ``granted`` confers ``required`` (literal match after alias expansion).

    ``required`` must be a real catalogue scope; anything else is a programming error in
    the route declaring it, so it raises ``ValueError`` instead of quietly denying.
    """
    if required not in _BY_NAME:
        raise ValueError(f"not a catalogue scope: {required!r}")
    return required in effective_scopes(granted)


def catalogue_document() -> dict[str, Any]:
    """Body of the public ``GET /api/developer/oauth/scopes``."""
    return {
        "scopes": [s.as_dict() for s in SCOPES],
        "aliases": dict(ALIASES),
    }


def group_for_consent(scopes: Iterable[str] | str) -> list[dict[str, Any]]:
    """Real scopes grouped by category, both in catalogue order, for consent display.

    Legacy strings appear as the real scope they grant; ``user:profile:read`` grants
    nothing and so adds nothing. Unknown strings are ignored (see ``effective_scopes``).
    """
    effective = effective_scopes(scopes)
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in SCOPES:
        if s.name in effective:
            groups.setdefault(s.category, []).append(
                {"name": s.name, "description": s.description, "sensitive": s.sensitive}
            )
    return [{"category": c, "scopes": items} for c, items in groups.items()]


def format_scope(scopes: Iterable[str] | str) -> str:
    """Space-delimited scope string in canonical order, deduplicated.

    Strings are kept as given (no alias expansion, so a token issued with legacy strings
    reports them back); real scopes come first in catalogue order, then legacy aliases in
    alias-table order. Raises ``InvalidScope`` for unknown strings.
    """
    tokens = list(dict.fromkeys(_as_tokens(scopes)))
    unknown = [t for t in tokens if not _is_known(t)]
    if unknown:
        raise InvalidScope(unknown)
    return " ".join(sorted(tokens, key=lambda t: _ORDER.get(t, _ALIAS_ORDER.get(t, 0))))
