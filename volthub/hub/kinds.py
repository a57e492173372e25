"""Component kinds: what the channel actor needs to know about each kind of component.

A kind names its commands (the dispatch table is built from them), makes a channel's
component, makes its store port over an open transaction, and — for kinds with durable
deadlines — says which channels have one open, so a restarted process resumes them.
A new concern of a channel (polls, predictions, timers) is a new kind; the loop in
actor.py does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from volthub.hub import interactive_store as stores
from volthub.hub.chat_store import TxChatStore
from volthub.hub.components import chat, giveaways, goals, polls, predictions, roles, timers
from volthub.hub.components.base import Component
from volthub.hub.roles_store import TxRoleStore
from volthub.persistence import Tx
from volthub.persistence import interactive as repo


@dataclass(frozen=True)
class ComponentKind:
    name: str
    commands: tuple[type, ...]
    create: Callable[[str], Component]  # channel id -> a fresh component
    store: Callable[[Tx, str, int], Any]  # (tx, channel id, now ms) -> its store port
    # Channels with an open deadline, read at start; None: this kind has no durable deadlines.
    open_deadlines: Callable[[Tx], list[str]] | None = None


def chat_kind(history_limit: int = chat.HISTORY_LIMIT_DEFAULT) -> ComponentKind:
    return ComponentKind(
        name="chat",
        commands=chat.ChatComponent.COMMANDS,
        create=lambda channel_id: chat.ChatComponent(channel_id, history_limit=history_limit),
        store=TxChatStore,
    )


def roles_kind() -> ComponentKind:
    """VIP and moderator grants; expiry comes from the role-expiry service."""
    return ComponentKind("roles", roles.RolesComponent.COMMANDS, roles.RolesComponent, TxRoleStore)


def interactive_kinds() -> tuple[ComponentKind, ...]:
    """Polls, predictions, giveaways, goals and timers."""
    return (
        ComponentKind(
            "polls",
            polls.PollsComponent.COMMANDS,
            polls.PollsComponent,
            stores.TxPollStore,
            repo.channels_with_open_polls,
        ),
        ComponentKind(
            "predictions",
            predictions.PredictionsComponent.COMMANDS,
            predictions.PredictionsComponent,
            stores.TxPredictionStore,
            repo.channels_with_open_predictions,
        ),
        ComponentKind(
            "giveaways",
            giveaways.GiveawaysComponent.COMMANDS,
            giveaways.GiveawaysComponent,
            stores.TxGiveawayStore,
            repo.channels_with_timed_giveaways,
        ),
        ComponentKind(
            "goals",
            goals.GoalsComponent.COMMANDS,
            goals.GoalsComponent,
            stores.TxGoalStore,
            repo.channels_with_calendar_goals,
        ),
        ComponentKind(
            "timers",
            timers.TimersComponent.COMMANDS,
            timers.TimersComponent,
            stores.TxTimerStore,
            repo.channels_with_running_timers,
        ),
    )


def default_kinds(history_limit: int = chat.HISTORY_LIMIT_DEFAULT) -> tuple[ComponentKind, ...]:
    """Every kind a channel actor runs in the app."""
    return (chat_kind(history_limit), roles_kind(), *interactive_kinds())


def dispatch_table(kinds: Sequence[ComponentKind]) -> dict[type, str]:
    """Command type -> the name of the kind that handles it; one handler per command."""
    table: dict[type, str] = {}
    for kind in kinds:
        for command in kind.commands:
            if command in table:
                raise ValueError(f"{command.__name__} is handled by both {table[command]} and {kind.name}")
            table[command] = kind.name
    return table
