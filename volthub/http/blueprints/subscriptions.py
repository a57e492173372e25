"""Subscriptions over REST.

Buying and gifting move Volts and honour `Idempotency-Key`. Every route here counts
against the subscription budget (120/min per client).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.idempotency import idempotent
from volthub.http.params import uuid_param
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import PERSON_EXAMPLE, Body, CountOut, Model, PersonOut, Query
from volthub.services.subscriptions import Subscriptions, roster_item, subscription_shape

blueprint = Blueprint("subscriptions", __name__)

Tier = Literal["tier1", "tier2", "tier3"]


class RosterItemOut(Model):
    """Nothing beyond id, names, tier, gift information and expiry."""

    userId: str
    username: str
    displayName: str
    tier: str
    isGift: bool
    gifter: PersonOut | None
    expiresAt: str


_ROSTER_ITEM_EXAMPLE = {
    **PERSON_EXAMPLE,
    "tier": "tier1",
    "isGift": False,
    "gifter": PERSON_EXAMPLE,
    "expiresAt": "2026-03-14T18:30:00Z",
}


class RosterOut(Model):
    example = {"roster": [_ROSTER_ITEM_EXAMPLE], "total": 3, "page": 1, "perPage": 1}

    roster: list[RosterItemOut]
    total: int = Field(description="all active subscribers of the channel, whatever the page")
    page: int
    perPage: int


class SubscribersOut(Model):
    example = {"subscribers": [_ROSTER_ITEM_EXAMPLE], "total": 3, "page": 1, "perPage": 1}

    subscribers: list[RosterItemOut]
    total: int
    page: int
    perPage: int


class RosterQuery(Query):
    page: int = Field(1, ge=1, le=1_000_000)
    perPage: int = Field(50, ge=1, le=100)


class SubscriptionOut(Model):
    id: str
    creatorId: str
    creator: PersonOut
    userId: str
    tier: str
    isGift: bool
    gifter: PersonOut | None
    months: int = Field(description="tenure: months subscribed to this channel, this period included")
    startedAt: str
    expiresAt: str
    status: str = Field(description="active or ended")
    endReason: str | None = Field(description="canceled or expired, once ended")
    endedAt: str | None


_SUBSCRIPTION_EXAMPLE = {
    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
    "creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000",
    "creator": PERSON_EXAMPLE,
    "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
    "tier": "tier1",
    "isGift": False,
    "gifter": PERSON_EXAMPLE,
    "months": 1,
    "startedAt": "2026-03-14T18:30:00Z",
    "expiresAt": "2026-03-14T18:30:00Z",
    "status": "active",
    "endReason": None,
    "endedAt": "2026-03-14T18:30:00Z",
}


class OneSubscriptionOut(Model):
    example = {"subscription": _SUBSCRIPTION_EXAMPLE}

    subscription: SubscriptionOut


class MySubscriptionsOut(Model):
    example = {"subscriptions": [_SUBSCRIPTION_EXAMPLE]}

    subscriptions: list[SubscriptionOut]


class GiftOut(Model):
    example = {"quantity": 1, "subscriptions": [_SUBSCRIPTION_EXAMPLE]}

    quantity: int = Field(description="subscriptions given (random gifts: at most the followers eligible)")
    subscriptions: list[SubscriptionOut]


class GiftLeaderOut(Model):
    rank: int
    userId: str
    username: str
    displayName: str
    gifts: int


class GiftLeaderboardOut(Model):
    example = {
        "creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000",
        "leaderboard": [
            {
                "rank": 1,
                "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                "username": "ada_streams",
                "displayName": "Ada Streams",
                "gifts": 1,
            }
        ],
    }

    creatorId: str
    leaderboard: list[GiftLeaderOut]


class LeaderQuery(Query):
    limit: int = Field(10, ge=1, le=100)


class SubscribeBody(Body):
    example = {"creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000", "tier": "tier1"}

    creatorId: str = Field(max_length=64)
    tier: Tier = "tier1"


class DirectGiftBody(Body):
    example = {
        "creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000",
        "recipientId": "0b7e2a4c-5d1f-4e8a-9c3b-2169f42e0000",
        "recipientUsername": "grace_plays",
        "tier": "tier1",
    }

    creatorId: str = Field(max_length=64)
    recipientId: str | None = Field(None, max_length=64)
    recipientUsername: str | None = Field(None, min_length=1, max_length=50)
    tier: Tier = "tier1"

    @model_validator(mode="after")
    def _one_recipient(self) -> DirectGiftBody:
        if (self.recipientId is None) == (self.recipientUsername is None):
            raise ValueError("give exactly one of recipientId or recipientUsername")
        return self


class RandomGiftBody(Body):
    example = {"creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000", "tier": "tier1", "quantity": 1}

    creatorId: str = Field(max_length=64)
    tier: Tier = "tier1"
    quantity: int = Field(1, ge=1, le=100)


class ManageBody(Body):
    example = {"creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000", "action": "cancel", "tier": "tier1"}

    creatorId: str = Field(max_length=64)
    action: Literal["cancel", "update"]
    tier: Tier | None = None

    @model_validator(mode="after")
    def _tier_to_update(self) -> ManageBody:
        if self.action == "update" and self.tier is None:
            raise ValueError("action update needs a tier")
        return self


def _service() -> Subscriptions:
    return runtime().services.subscriptions


def _out(sub: Any) -> SubscriptionOut:
    return SubscriptionOut(**subscription_shape(sub))


async def _roster(creator_id: str, query: RosterQuery) -> tuple[list[RosterItemOut], int]:
    """One page of the channel's active subscribers, and how many there are in all."""
    subs, total = await _service().roster(creator_id, query.page, query.perPage)
    return [RosterItemOut(**roster_item(s)) for s in subs], total


# --- developer routes (the token owner's channel) ---------------------------------------------


@blueprint.get("/api/developer/subscriptions/count")
@access.token("subscriptions:read")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_response(CountOut)
async def developer_count() -> CountOut:
    """The authoritative number of active subscribers of your channel (live or offline)."""
    return CountOut(count=await _service().count(access.principal().user_id))


@blueprint.get("/api/developer/subscriptions")
@access.token("subscriptions:read")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_querystring(RosterQuery)
@validate_response(RosterOut)
async def developer_roster(query_args: RosterQuery) -> RosterOut:
    """Your channel's active subscribers, oldest first: `page` (1-based) and `perPage`
    (1-100, default 50); `total` counts them all."""
    roster, total = await _roster(access.principal().user_id, query_args)
    return RosterOut(roster=roster, total=total, page=query_args.page, perPage=query_args.perPage)


# --- viewers and creators ----------------------------------------------------------------------


@blueprint.get("/api/subscriptions/my-subscriptions")
@access.token("subscriptions:read")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_response(MySubscriptionsOut)
async def my_subscriptions() -> MySubscriptionsOut:
    """The caller's active subscriptions, newest first."""
    subs = await _service().mine(access.principal().user_id)
    return MySubscriptionsOut(subscriptions=[_out(s) for s in subs])


@blueprint.get("/api/subscriptions/creator/<creator_id>/subscribers")
@access.token("subscriptions:read")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_querystring(RosterQuery)
@validate_response(SubscribersOut)
@access.own_channel("creator_id", name="creatorId")
async def creator_subscribers(creator_id: str, query_args: RosterQuery) -> SubscribersOut:
    """Your own channel's active subscribers (403 for another creator's)."""
    roster, total = await _roster(creator_id, query_args)
    return SubscribersOut(subscribers=roster, total=total, page=query_args.page, perPage=query_args.perPage)


@blueprint.get("/api/subscriptions/creator/<creator_id>/gift-leaderboard")
@access.public
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_querystring(LeaderQuery)
@validate_response(GiftLeaderboardOut)
async def gift_leaderboard(creator_id: str, query_args: LeaderQuery) -> GiftLeaderboardOut:
    """Who gifted the most subscriptions to the channel."""
    creator_id = uuid_param(creator_id, "creatorId")
    board = await _service().gift_leaderboard(creator_id, query_args.limit)
    return GiftLeaderboardOut(creatorId=creator_id, leaderboard=[GiftLeaderOut(**row) for row in board])


@blueprint.post("/api/subscriptions/subscribe")
@idempotent
@access.token("subscriptions:write")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_request(SubscribeBody)
@validate_response(OneSubscriptionOut, 201)
@error_responses(404)
async def subscribe(data: SubscribeBody) -> tuple[OneSubscriptionOut, int]:
    """Subscribe for one period, paid in Volts at the tier's price: emits `channel.subscribe`.
    409 `already_subscribed`; 400 `insufficient_funds`; 404 when no channel has the id
    `creatorId`."""
    creator_id = uuid_param(data.creatorId, "creatorId")
    sub = await _service().subscribe(access.principal().user_id, creator_id, data.tier)
    return OneSubscriptionOut(subscription=_out(sub)), 201


@blueprint.post("/api/subscriptions/gift/direct")
@idempotent
@access.token("subscriptions:write")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_request(DirectGiftBody)
@validate_response(GiftOut, 201)
@error_responses(404)
async def gift_direct(data: DirectGiftBody) -> tuple[GiftOut, int]:
    """Gift one subscription (never renews): emits `channel.subscribe` (isGift) and
    `channel.subscription.gift`. 409 `already_subscribed` when the recipient is subscribed;
    404 when the channel or the recipient does not exist."""
    creator_id = uuid_param(data.creatorId, "creatorId")
    recipient_id = None if data.recipientId is None else uuid_param(data.recipientId, "recipientId")
    subs = await _service().gift(
        access.principal().user_id,
        creator_id,
        data.tier,
        recipient_id=recipient_id,
        recipient_username=data.recipientUsername,
    )
    return GiftOut(quantity=len(subs), subscriptions=[_out(s) for s in subs]), 201


@blueprint.post("/api/subscriptions/gift/random")
@idempotent
@access.token("subscriptions:write")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_request(RandomGiftBody)
@validate_response(GiftOut, 201)
@error_responses(404)
async def gift_random(data: RandomGiftBody) -> tuple[GiftOut, int]:
    """Gift up to `quantity` subscriptions to random followers of the channel (never the
    gifter, never someone subscribed); pays for those given. 409 `no_eligible_recipients`;
    404 when no channel has the id `creatorId`."""
    creator_id = uuid_param(data.creatorId, "creatorId")
    subs = await _service().gift_random(access.principal().user_id, creator_id, data.tier, data.quantity)
    return GiftOut(quantity=len(subs), subscriptions=[_out(s) for s in subs]), 201


@blueprint.post("/api/subscriptions/manage")
@idempotent
@access.token("subscriptions:write")
@limited("subscriptions")
@tag(["Subscriptions"])
@validate_request(ManageBody)
@validate_response(OneSubscriptionOut)
@error_responses(404)
async def manage(data: ManageBody) -> OneSubscriptionOut:
    """`cancel` ends your subscription now (`channel.subscription.end`, reason `canceled`);
    `update` changes its tier (an upgrade pays the difference). 404 `not_subscribed`."""
    creator_id = uuid_param(data.creatorId, "creatorId")
    me = access.principal().user_id
    if data.action == "cancel":
        sub = await _service().cancel(me, creator_id)
    else:
        if data.tier is None:  # the model refuses it already; keeps the type checker sure
            raise ApiError(400, "validation_error", "action update needs a tier")
        sub = await _service().change_tier(me, creator_id, data.tier)
    return OneSubscriptionOut(subscription=_out(sub))
