"""Channel-points rewards over REST.

Listing is public: `items` (the channel's custom rewards) and `items/with-built-in` (the
built-in rewards first, then the custom ones). The spec does not show how rewards are
made; a channel's owner creates them with a first-party token (the streamer's dashboard).
The Events API's `channel:getRewards` returns the same list in the socket shape.

Redeeming moves the cost from the viewer's points to the channel (ledger) with the
redemption row, and emits `channel.channel_points_redemption` (status `unfulfilled`). A
redemption belongs to the live stream: the reward's `maxPerStream` / `maxPerUserPerStream`
count there. The owner fulfils or rejects it once; a rejection refunds the cost.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.idempotency import idempotent
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model, Query, example_of
from volthub.services.channel_points import ChannelPoints, Redemptions, rest_shape

blueprint = Blueprint("channel_points", __name__, url_prefix="/api/channel-points")


class RewardOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "name": "Speedrun Club",
        "cost": 100,
        "description": "Speedruns and chill every Friday.",
        "iconUrl": "https://volthub.example/iconUrl",
        "enabled": False,
        "builtInType": None,
        "requiresModeratorApproval": False,
        "maxPerStream": 1,
        "maxPerUserPerStream": 1,
    }

    id: str
    name: str
    cost: int
    description: str
    iconUrl: str | None
    enabled: bool
    builtInType: str | None = Field(description="null for a custom reward; e.g. first")
    requiresModeratorApproval: bool
    maxPerStream: int | None
    maxPerUserPerStream: int | None


class RewardList(Model):
    example = {"items": [example_of(RewardOut)]}

    items: list[RewardOut]


class RewardBody(Body):
    example = {
        "name": "Speedrun Club",
        "cost": 100,
        "description": "Speedruns and chill every Friday.",
        "iconUrl": "https://volthub.example/iconUrl",
        "enabled": True,
        "requiresModeratorApproval": False,
        "maxPerStream": 1,
        "maxPerUserPerStream": 1,
    }

    name: str = Field(min_length=1, max_length=45)
    cost: int = Field(ge=1, le=10_000_000)
    description: str | None = Field(None, max_length=200)
    iconUrl: str | None = Field(None, max_length=2048)
    enabled: bool = True
    requiresModeratorApproval: bool = Field(
        False,
        description="true: redemptions wait as unfulfilled for the owner or a moderator; false: fulfilled at once",
    )
    maxPerStream: int | None = Field(None, ge=1, le=1_000_000)
    maxPerUserPerStream: int | None = Field(None, ge=1, le=1_000_000)

    @field_validator("name")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        return value.strip()

    @field_validator("iconUrl")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value and not value.startswith("https://"):
            raise ValueError("iconUrl must be an https:// URL")
        return value or None


def _service() -> ChannelPoints:
    return runtime().services.channel_points


@blueprint.get("/<channel_id>/items")
@access.public
@tag(["Channel points"])
@validate_response(RewardList)
async def items(channel_id: str) -> RewardList:
    """The channel's custom rewards, oldest first."""
    found = await _service().rewards(uuid_param(channel_id, "channelId"), built_in=False)
    return RewardList(items=[RewardOut(**rest_shape(reward)) for reward in found])


@blueprint.get("/<channel_id>/items/with-built-in")
@access.public
@tag(["Channel points"])
@validate_response(RewardList)
async def items_with_built_in(channel_id: str) -> RewardList:
    """The built-in rewards (builtInType set), then the channel's custom rewards."""
    found = await _service().rewards(uuid_param(channel_id, "channelId"), built_in=True)
    return RewardList(items=[RewardOut(**rest_shape(reward)) for reward in found])


@blueprint.post("/<channel_id>/items")
@access.first_party
@tag(["Channel points"])
@error_responses(409)
@validate_request(RewardBody)
@validate_response(RewardOut, 201)
@access.own_channel()
async def create_item(channel_id: str, data: RewardBody) -> tuple[RewardOut, int]:
    """Create a custom reward in your own channel (first-party token; 403 elsewhere).

    At most 100 rewards per channel (409 `too_many_rewards`)."""
    reward = await _service().create(channel_id, data.model_dump())
    return RewardOut(**rest_shape(reward)), 201


class BalanceOut(Model):
    example = {"channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000", "balance": 100}

    channelId: str
    balance: int


class PointsLeaderOut(Model):
    rank: int
    userId: str
    username: str
    displayName: str
    points: int


class PointsLeaderboardOut(Model):
    example = {
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "leaderboard": [
            {
                "rank": 1,
                "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                "username": "ada_streams",
                "displayName": "Ada Streams",
                "points": 100,
            }
        ],
    }

    channelId: str
    leaderboard: list[PointsLeaderOut]


class LeaderQuery(Query):
    limit: int = Field(10, ge=1, le=100)


@blueprint.get("/<channel_id>/balance")
@access.token("points:read")
@tag(["Channel points"])
@validate_response(BalanceOut)
async def get_balance(channel_id: str) -> BalanceOut:
    """The caller's channel-points balance in that channel (ledger-backed)."""
    channel_id = uuid_param(channel_id, "channelId")
    held = await _service().balance(channel_id, access.principal().user_id)
    return BalanceOut(channelId=channel_id, balance=held)


@blueprint.get("/<channel_id>/leaderboard")
@access.public
@tag(["Channel points"])
@validate_querystring(LeaderQuery)
@validate_response(PointsLeaderboardOut)
async def get_leaderboard(channel_id: str, query_args: LeaderQuery) -> PointsLeaderboardOut:
    """Viewers of the channel by points held."""
    channel_id = uuid_param(channel_id, "channelId")
    board = await _service().leaderboard(channel_id, query_args.limit)
    return PointsLeaderboardOut(channelId=channel_id, leaderboard=[PointsLeaderOut(**row) for row in board])


# --- redemptions ---------------------------------------------------------------------------


class RedeemBody(Body):
    example = {"userInput": "Play the chess opening!"}

    userInput: str | None = Field(None, max_length=500, description="the viewer's text for the reward")

    @field_validator("userInput")
    @classmethod
    def _trimmed(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


class RedemptionOut(Model):
    example = {
        "redemptionId": "0b7e2a4c-5d1f-4e8a-9c3b-b5a0ec470000",
        "rewardId": "0b7e2a4c-5d1f-4e8a-9c3b-052013a40000",
        "rewardTitle": "Hydrate!",
        "rewardCost": 100,
        "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
        "username": "ada_streams",
        "displayName": "Ada Streams",
        "userInput": "Play the chess opening!",
        "status": "active",
        "redeemedAt": "2026-03-14T18:30:00Z",
        "streamId": "0b7e2a4c-5d1f-4e8a-9c3b-e01370cd0000",
        "resolvedAt": "2026-03-14T18:30:00Z",
    }

    redemptionId: str
    rewardId: str
    rewardTitle: str
    rewardCost: int
    userId: str
    username: str
    displayName: str
    userInput: str | None = None
    status: str = Field(description="unfulfilled, fulfilled or rejected (refunded)")
    redeemedAt: str
    streamId: str
    resolvedAt: str | None


class RedeemedOut(RedemptionOut):
    example = {**example_of(RedemptionOut), "balance": 100}

    balance: int = Field(description="the redeemer's points in this channel afterwards")


class RedemptionPage(Model):
    example = {"items": [example_of(RedemptionOut)], "nextCursor": None}

    items: list[RedemptionOut]
    nextCursor: str | None


class RedemptionQuery(Query):
    limit: int = Field(50, ge=1, le=100)
    cursor: str | None = Field(None, max_length=512)
    status: Literal["unfulfilled", "fulfilled", "rejected"] | None = None


def _redemptions() -> Redemptions:
    return runtime().services.redemptions


@blueprint.post("/<channel_id>/redeem/<item_id>")
@idempotent
@access.token("points:write")
@tag(["Channel points"])
@error_responses(404, 409)
@validate_request(RedeemBody)
@validate_response(RedeemedOut, 201)
async def redeem(channel_id: str, item_id: str, data: RedeemBody) -> tuple[RedeemedOut, int]:
    """Spend your points in the channel on a reward (a custom one or a built-in `builtin-…`).

    400 `insufficient_funds`; 404 unknown channel or reward; 409 `reward_disabled`,
    `channel_not_live` (redemptions belong to a live stream) or `redemption_limit_reached`
    (details.scope `stream` or `user`). Honours `Idempotency-Key`."""
    channel_id = uuid_param(channel_id, "channelId")
    redeemed = await _redemptions().redeem(channel_id, item_id, access.principal().user_id, data.userInput)
    return RedeemedOut(**redeemed), 201


@blueprint.get("/<channel_id>/stream/<stream_id>/redemptions")
@access.public
@tag(["Channel points"])
@validate_querystring(RedemptionQuery)
@validate_response(RedemptionPage)
async def stream_redemptions(channel_id: str, stream_id: str, query_args: RedemptionQuery) -> RedemptionPage:
    """The redemptions of one stream of the channel, oldest first; cursor list (limit ≤ 100),
    optionally of one status."""
    channel_id = uuid_param(channel_id, "channelId")
    stream_id = uuid_param(stream_id, "streamId")
    items, cursor = await _redemptions().for_stream(
        channel_id, stream_id, query_args.status, query_args.limit, query_args.cursor
    )
    return RedemptionPage(items=[RedemptionOut(**item) for item in items], nextCursor=cursor)


async def _resolve(channel_id: str, redemption_id: str, status: str) -> RedemptionOut:
    redemption_id = uuid_param(redemption_id, "redemptionId")
    channel_id = uuid_param(channel_id, "channelId")
    actor = access.principal().user_id
    return RedemptionOut(**await _redemptions().resolve(channel_id, redemption_id, status, actor))


@blueprint.post("/<channel_id>/redemptions/<redemption_id>/fulfill")
@access.token("points:write")
@tag(["Channel points"])
@error_responses(403, 404, 409)
@validate_response(RedemptionOut)
async def fulfill(channel_id: str, redemption_id: str) -> RedemptionOut:
    """Mark a redemption fulfilled: by the channel's owner or one of its moderators (403
    `not_channel_moderator` otherwise). Only rewards with `requiresModeratorApproval` wait
    for this; others are fulfilled when redeemed. 409 `redemption_resolved` when it was
    fulfilled or rejected already."""
    return await _resolve(channel_id, redemption_id, "fulfilled")


@blueprint.post("/<channel_id>/redemptions/<redemption_id>/reject")
@access.token("points:write")
@tag(["Channel points"])
@error_responses(403, 404, 409)
@validate_response(RedemptionOut)
async def reject(channel_id: str, redemption_id: str) -> RedemptionOut:
    """Reject a waiting redemption (the channel's owner or one of its moderators): its cost
    goes back to the viewer, once (409 `redemption_resolved` when it was fulfilled or
    rejected already)."""
    return await _resolve(channel_id, redemption_id, "rejected")
