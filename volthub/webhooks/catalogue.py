"""The webhook event catalogue of spec §6.2, as data (sans-IO).

A webhook subscribes to names from :data:`WEBHOOK_EVENTS`. ``channel.cheer`` is the legacy
name of ``channel.volts``: a webhook subscribed to it receives ``channel.volts`` events
under the name it asked for. ``chat.message`` is delivered only while the app holds
``chat:read`` on its owner's channel.
"""

from __future__ import annotations

from collections.abc import Iterable

# One catalogue for the whole platform (volthub.hub.catalogue); this is its webhook view.
from volthub.hub.catalogue import ALIASES, REQUIRED_SCOPE, WEBHOOK_EVENT_GROUPS, WEBHOOK_EVENTS  # noqa: E402

__all__ = ["ALIASES", "REQUIRED_SCOPE", "WEBHOOK_EVENT_GROUPS", "WEBHOOK_EVENTS", "delivery_name", "subscribed_names", "unknown_events"]


def unknown_events(names: Iterable[str]) -> list[str]:
    """The names that are not in the catalogue, in the order given, without repeats."""
    return list(dict.fromkeys(name for name in names if name not in WEBHOOK_EVENTS))


def subscribed_names(event_name: str) -> tuple[str, ...]:
    """Subscription names that receive a platform event: itself and its legacy aliases."""
    if event_name not in WEBHOOK_EVENTS or event_name in ALIASES:
        return ()
    return (event_name, *(alias for alias, real in ALIASES.items() if real == event_name))


def delivery_name(event_name: str, subscribed: Iterable[str]) -> str | None:
    """The name a webhook subscribed to ``subscribed`` receives ``event_name`` under, or
    None when it does not receive it. Subscribed to both a name and its alias, the webhook
    gets one delivery, under the current name (receivers dedupe by event id anyway)."""
    wanted = set(subscribed)
    for name in subscribed_names(event_name):
        if name in wanted:
            return name
    return None
