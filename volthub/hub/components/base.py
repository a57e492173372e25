"""What every channel component is: a sans-IO state machine the actor drives.

A component owns one concern of a channel's live state (chat, polls, timers, ...). It never
does I/O itself: the actor hands it a *store port* (a small Protocol the component declares,
implemented by the hub over the open transaction, faked in unit tests) for the reads its
decisions need, and applies the writes it returns. So:

    component.load(store)                      # inside a transaction, before first use
    outcome = component.handle(command, now_ms, store)
    component.next_deadline()                  # epoch ms of its next timed step, or None
    outcome = component.on_deadline(now_ms, store)
    component.is_idle()                        # nothing running that needs its actor

`handle` answers a refusal by raising `Refused`, before it returned any write: a refused
command leaves nothing behind, and the other commands of its batch go on. A component
built on `Dispatcher` marks the method deciding each command type with `@handles`; its
`handle` routes by the command's type, and its `COMMANDS` (the types it decides) come from
those marks, so the list the actor's dispatch table reads cannot drift from the routing.

A durable deadline (a poll's end, a timer reaching zero) lives in the component's table;
its kind (hub/kinds.py) names the channels with one open, so a restarted process resumes
them. Its effect is a guarded transition the store port offers and reports on
(`UPDATE ... WHERE status = 'open' RETURNING ...`): `on_deadline` emits only when it won,
so two processes never both end the same poll (tests/hub/probe.py's countdown shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar


@dataclass(frozen=True)
class Refusal:
    """A rule said no: the HTTP status, error code, message and details the caller gets."""

    status: int
    code: str
    message: str
    details: dict[str, Any] | None = None


class Refused(Exception):
    """Raised by a component's `handle` to refuse a command; carries the `Refusal`."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def refuse(refusal: Refusal | None) -> None:
    """Raise `Refused` when a rule returned a refusal."""
    if refusal is not None:
        raise Refused(refusal)


@dataclass(frozen=True)
class Emitted:
    """An event the outcome causes: published after the commit, with the channel's id."""

    name: str
    data: dict[str, Any]


@dataclass
class Outcome:
    """What one command (or one deadline) decided.

    `writes` are plain records the component's store port applies in order inside the
    transaction; `shared_state_changed` says the store now holds state other processes'
    actors cache (settings, a poll's status), so the channel's version moves and they reload.
    """

    reply: Any = None
    writes: list[Any] = field(default_factory=list)
    events: list[Emitted] = field(default_factory=list)
    shared_state_changed: bool = False


class Store(Protocol):
    """The least every store port offers: applying the component's writes."""

    def apply(self, write: Any) -> None: ...


class Component(Protocol):
    """The shape of a component; each declares the precise store port it needs."""

    def load(self, store: Any) -> None:
        """(Re)read the state the component keeps, inside the actor's transaction."""

    def handle(self, command: Any, now_ms: int, store: Any) -> Outcome:
        """Decide one command. Raise `Refused` to refuse it."""

    def next_deadline(self) -> int | None:
        """Epoch ms of the component's next timed step; None when it has none."""

    def on_deadline(self, now_ms: int, store: Any) -> Outcome:
        """Take every step due at `now_ms` (called once `next_deadline()` has passed)."""

    def is_idle(self) -> bool:
        """True when nothing it owns needs a live actor (no open poll, no running timer)."""


ComponentT = TypeVar("ComponentT")
CommandT = TypeVar("CommandT")
StoreT = TypeVar("StoreT")
# A method deciding one command type: (self, command, now_ms, store) -> Outcome.
Handler = Callable[[ComponentT, CommandT, int, StoreT], Outcome]

_HANDLES = "handles_command"  # the function attribute `handles` marks a method with


def handles(
    command: type[CommandT],
) -> Callable[[Handler[ComponentT, CommandT, StoreT]], Handler[ComponentT, CommandT, StoreT]]:
    """Mark a `Dispatcher` method as the one deciding commands of type `command` (the
    method's command parameter must accept that type)."""

    def mark(method: Handler[ComponentT, CommandT, StoreT]) -> Handler[ComponentT, CommandT, StoreT]:
        vars(method)[_HANDLES] = command
        return method

    return mark


class Dispatcher(Generic[StoreT]):
    """A component whose `handle` calls the method marked `@handles` for the command's type."""

    COMMANDS: ClassVar[tuple[type, ...]] = ()
    # How the `TypeError` for a command of any other type begins (a caller's bug: the
    # registry hands a component only its own command types).
    UNHANDLED: ClassVar[str]
    _handlers: ClassVar[dict[type, Callable[..., Outcome]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        marked = ((getattr(value, _HANDLES, None), value) for value in vars(cls).values())
        cls._handlers = {command: method for command, method in marked if command is not None}
        cls.COMMANDS = tuple(cls._handlers)

    def handle(self, command: Any, now_ms: int, store: StoreT) -> Outcome:
        """Decide one command. Raise `Refused` to refuse it."""
        handler = self._handlers.get(type(command))
        if handler is None:
            raise TypeError(f"{self.UNHANDLED} {type(command).__name__}")
        return handler(self, command, now_ms, store)
