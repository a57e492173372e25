"""Component kinds and the command dispatch table."""

from __future__ import annotations

import pytest

from tests.hub import probe
from volthub.hub.components import chat
from volthub.hub.kinds import chat_kind, dispatch_table


def test_each_command_type_goes_to_its_kind():
    table = dispatch_table((chat_kind(), probe.PROBE))
    assert table[chat.SendMessage] == "chat" and table[chat.Moderate] == "chat"
    assert table[probe.Echo] == "probe"


def test_a_command_handled_twice_is_refused_at_construction():
    with pytest.raises(ValueError, match="SendMessage"):
        dispatch_table((chat_kind(), chat_kind()))


def test_the_chat_kind_passes_its_history_limit():
    assert chat_kind(history_limit=500).create("c").history_limit == 500
