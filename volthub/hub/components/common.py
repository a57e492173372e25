"""What the interactive components (polls, predictions, giveaways, goals, timers) share:
their refusals, checks, who may take part, and the chat card each begin and end posts."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from volthub.hub.components import chat
from volthub.hub.components.base import Outcome, Refusal, Refused, Store
from volthub.hub.components.chat_rules import Standing

Found = TypeVar("Found")

BANNED = Refusal(403, "banned", "you are banned or timed out in this channel")


class CardStore(Store, Protocol):
    """A store port that can also post chat cards (it holds the channel's chat port)."""

    @property
    def chat(self) -> chat.ChatStore: ...


def invalid_state(what: str, status: str, operation: str) -> Refused:
    """409 `invalid_state` with the current status."""
    return Refused(Refusal(409, "invalid_state", f"cannot {operation} a {what} that is {status}", {"status": status}))


def already_active(what: str, active_id: str) -> Refused:
    return Refused(Refusal(409, "already_active", f"this channel already has an active {what}", {"id": active_id}))


def not_found(what: str, item_id: str) -> Refused:
    return Refused(Refusal(404, "not_found", f"{what} not found in this channel", {"id": item_id}))


def found(item: Found | None, what: str, item_id: str) -> Found:
    """`item`, or 404 `not_found` when the lookup found none."""
    if item is None:
        raise not_found(what, item_id)
    return item


class Stated(Protocol):
    """A poll, prediction or giveaway: what a refusal says of it."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...


Active = TypeVar("Active", bound=Stated)


def current(
    active: Active | None, what: str, item_id: str, lookup: Callable[[str], Stated | None], operation: str
) -> Active:
    """`active` (the component's open or active one) when it is `item_id`; else 404 when the
    channel has no such `what`, or 409 `invalid_state` with its status."""
    if active is None or active.id != item_id:
        raise invalid_state(what, found(lookup(item_id), what, item_id).status, operation)
    return active


@contextmanager
def refusing_invalid(details: dict[str, Any] | None = None) -> Iterator[None]:
    """A check's `ValueError` inside becomes 400 `validation_error` with its message."""
    try:
        yield
    except ValueError as exc:
        raise Refused(Refusal(400, "validation_error", str(exc), details)) from None


def check_text(value: str, field: str, maximum: int) -> str:
    """1–`maximum` code points, not blank, no control characters; surrounding space trimmed."""
    text = value.strip()
    if not text:
        raise ValueError(f"{field} must not be blank")
    if len(text) > maximum:
        raise ValueError(f"{field} must be at most {maximum} characters")
    if any(unicodedata.category(char) == "Cc" for char in text):
        raise ValueError(f"{field} must not contain control characters")
    return text


def check_choices(values: list[str], field: str, fewest: int, most: int, longest: int) -> list[str]:
    """`fewest`–`most` texts, each as `check_text` wants it, no two the same ignoring case."""
    if not fewest <= len(values) <= most:
        raise ValueError(f"{field} must hold {fewest}–{most} entries")
    texts = [check_text(value, field, longest) for value in values]
    if len({text.casefold() for text in texts}) != len(texts):
        raise ValueError(f"{field} must differ from each other")
    return texts


def check_seconds(seconds: int, field: str, shortest: int, longest: int) -> int:
    """`shortest`–`longest` seconds."""
    if not shortest <= seconds <= longest:
        raise ValueError(f"{field} must be {shortest}–{longest}")
    return seconds


class StandingStore(Protocol):
    def standing(self, user_id: str) -> Standing | None: ...


def participant(store: StandingStore, user_id: str, now_ms: int, own: Refusal) -> Standing:
    """The standing of a viewer who may take part: a known user (else 404), not the
    broadcaster (else `own`), neither banned nor timed out (else 403 `banned`)."""
    standing = found(store.standing(user_id), "user", user_id)
    if standing.is_broadcaster:
        raise Refused(own)
    if standing.banned or (standing.timeout_ends_at is not None and standing.timeout_ends_at > now_ms):
        raise Refused(BANNED)
    return standing


def add_card(
    outcome: Outcome, store: CardStore, channel_id: str, now_ms: int, card_type: str, text: str, payload: dict[str, Any]
) -> Outcome:
    """Append the chat card of a begin or end to `outcome` (same transaction, same order)."""
    return add_steps(
        outcome, chat.system_card(store.chat, channel_id, now_ms, text, {"type": card_type, "payload": payload})
    )


def add_steps(outcome: Outcome, step: Outcome) -> Outcome:
    """Append `step`'s writes and events to `outcome` (one command moving several things)."""
    outcome.writes.extend(step.writes)
    outcome.events.extend(step.events)
    return outcome
