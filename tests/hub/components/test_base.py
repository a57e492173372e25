"""The command routing every component shares (`Dispatcher`, `handles`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from volthub.hub.components.base import Dispatcher, Outcome, handles


@dataclass(frozen=True)
class Ping:
    text: str


@dataclass(frozen=True)
class Count:
    by: int


class Echoes(Dispatcher[Any]):
    UNHANDLED = "echoes do not handle"

    @handles(Ping)
    def _ping(self, command: Ping, now_ms: int, store: Any) -> Outcome:
        return Outcome((command.text, now_ms, store))

    @handles(Count)
    def _count(self, command: Count, now_ms: int, store: Any) -> Outcome:
        return Outcome(command.by + 1)


def test_commands_are_the_marked_types_in_their_order():
    assert (Ping, Count) == Echoes.COMMANDS


def test_each_command_goes_to_its_method_with_the_time_and_store():
    component = Echoes()
    assert component.handle(Ping("hi"), 7, "store").reply == ("hi", 7, "store")
    assert component.handle(Count(1), 7, "store").reply == 2


def test_a_command_of_another_type_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="^echoes do not handle object$"):
        Echoes().handle(object(), 0, None)
