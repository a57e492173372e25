"""What the interactive components (polls, predictions, giveaways, goals, timers) share:
their refusals, text checks, and the chat card each begin and end posts."""

from __future__ import annotations

import unicodedata
from typing import Any, Protocol

from volthub.hub.components import chat
from volthub.hub.components.base import Outcome, Refusal, Refused


class CardStore(Protocol):
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


def add_card(
    outcome: Outcome, store: CardStore, channel_id: str, now_ms: int, card_type: str, text: str, payload: dict[str, Any]
) -> Outcome:
    """Append the chat card of a begin or end to `outcome` (same transaction, same order)."""
    card = chat.system_card(store.chat, channel_id, now_ms, text, {"type": card_type, "payload": payload})
    outcome.writes.extend(card.writes)
    outcome.events.extend(card.events)
    return outcome
