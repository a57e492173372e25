"""The store's failures that any service call may raise, for the layers above to answer
(a 503 while the database or the media storage does not answer, a 400 for a bad cursor or
bytes the database refuses): they reach the HTTP layer through the services, as data does."""

from __future__ import annotations

from volthub.persistence import DatabaseUnavailable, InvalidData, StorageUnavailable
from volthub.persistence.pagination import InvalidCursor

__all__ = ["DatabaseUnavailable", "InvalidCursor", "InvalidData", "StorageUnavailable"]
