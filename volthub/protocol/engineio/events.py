"""The base of what an Engine.IO session reports to its adapter.

It stands alone so that the packet layer's errors can carry a closing session's events
without importing the session (which builds on the packet layer).
"""

from __future__ import annotations


class SessionEvent:
    """What a session reports to its adapter; Socket.IO adds its own kinds."""

    __slots__ = ()
