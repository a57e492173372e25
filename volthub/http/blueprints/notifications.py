"""Notifications: the caller's own, newest first; read state per notification."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_response

from volthub.http import access
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import CountOut, Model, PageQuery, example_of
from volthub.services.notifications import Notification, Notifications

blueprint = Blueprint("notifications", __name__, url_prefix="/api/notifications")


class NotificationQuery(PageQuery):
    unread: bool = Field(False, description="only unread notifications")


class NotificationOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "type": "chat.message",
        "title": "Friday night speedrun",
        "message": "GG everyone!",
        "data": {},
        "read": False,
        "readAt": "2026-03-14T18:30:00Z",
        "createdAt": "2026-03-14T18:30:00Z",
    }

    id: str
    type: str = Field(description="e.g. webhook.disabled")
    title: str
    message: str
    data: dict[str, Any]
    read: bool
    readAt: str | None
    createdAt: str


class NotificationPage(Model):
    example = {"items": [example_of(NotificationOut)], "nextCursor": None}

    items: list[NotificationOut]
    nextCursor: str | None


class ReadAllOut(Model):
    example = {"updated": 1}

    updated: int


def notification_out(item: Notification) -> NotificationOut:
    return NotificationOut.from_record(item, read=item.read_at is not None)


def _notifications() -> Notifications:
    return runtime().services.notifications


@blueprint.get("")
@access.token("notifications:read")
@tag(["Notifications"])
@validate_querystring(NotificationQuery)
@validate_response(NotificationPage)
async def list_notifications(query_args: NotificationQuery) -> NotificationPage:
    """The caller's notifications, newest first; cursor pagination (limit ≤ 100),
    `unread=true` for unread ones only."""
    me = access.principal().user_id
    page = await _notifications().page(me, query_args.limit, query_args.cursor, unread_only=query_args.unread)
    return NotificationPage(items=[notification_out(n) for n in page.items], nextCursor=page.next_cursor)


@blueprint.get("/unread-count")
@access.token("notifications:read")
@tag(["Notifications"])
@validate_response(CountOut)
async def unread_count() -> CountOut:
    """How many of the caller's notifications are unread: `{count}`."""
    return CountOut(count=await _notifications().unread_count(access.principal().user_id))


@blueprint.post("/<notification_id>/read")
@access.token("notifications:write")
@tag(["Notifications"])
@validate_response(NotificationOut)
async def mark_read(notification_id: str) -> NotificationOut:
    """Mark one notification read (idempotent; the first read time stays)."""
    notification_id = uuid_param(notification_id, "id")
    return notification_out(await _notifications().mark_read(access.principal().user_id, notification_id))


@blueprint.post("/read-all")
@access.token("notifications:write")
@tag(["Notifications"])
@validate_response(ReadAllOut)
async def mark_all_read() -> ReadAllOut:
    """Mark every unread notification of the caller read: `{updated}` is how many."""
    return ReadAllOut(updated=await _notifications().mark_all_read(access.principal().user_id))
