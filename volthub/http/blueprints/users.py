"""Users and followers."""

from __future__ import annotations

from pydantic import Field, field_validator
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError, not_found
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, DisplayName, Model, PageQuery, Query, UserOut, example_of
from volthub.http.users_view import user_out
from volthub.hub.clock import iso8601
from volthub.services.accounts import Accounts, SelfFollow, UnknownUser
from volthub.services.users import User, Users

blueprint = Blueprint("users", __name__, url_prefix="/api/users")


class ProfileBody(Body):
    example = {"displayName": "Ada Streams", "bio": "Speedruns and chill every Friday."}

    displayName: DisplayName | None = None
    bio: str | None = Field(None, max_length=300, description='null clears the bio (as "" does)')
    avatarUrl: str | None = Field(None, max_length=2048)

    @field_validator("bio")
    @classmethod
    def _null_clears(cls, value: str | None) -> str:
        # The column holds "" for no bio; a client sending null means the same.
        return value or ""

    @field_validator("avatarUrl")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and value and not value.startswith("https://"):
            raise ValueError("avatarUrl must be an https:// URL")
        return value or None


class SearchQuery(Query):
    q: str = Field(min_length=1, max_length=50)
    limit: int = Field(20, ge=1, le=100)


class UserList(Model):
    example = {"items": [example_of(UserOut)]}

    items: list[UserOut]


class FollowOut(UserOut):
    followedAt: str


class FollowPage(Model):
    example = {"items": [{**example_of(UserOut), "followedAt": "2026-03-14T18:30:00Z"}], "nextCursor": None}

    items: list[FollowOut]
    nextCursor: str | None


class FollowStatus(Model):
    example = {"following": False, "followedAt": "2026-03-14T18:30:00Z"}

    following: bool
    followedAt: str | None


def accounts() -> Accounts:
    return runtime().services.accounts


def users() -> Users:
    return runtime().services.users


async def _existing_user(user_id: str, name: str = "userId") -> User:
    user_id = uuid_param(user_id, name)
    user = await users().by_id(user_id)
    if user is None:
        raise not_found("user", userId=user_id)
    return user


@blueprint.get("/me")
@access.token()
@tag(["Users"])
@validate_response(UserOut)
async def get_me() -> UserOut:
    """The current user; works with any valid token."""
    return user_out(await _existing_user(access.principal().user_id))


@blueprint.put("/me")
@access.token("user:write")
@tag(["Users"])
@validate_request(ProfileBody)
@validate_response(UserOut)
async def put_me(data: ProfileBody) -> UserOut:
    """Update the profile; omitted fields are left unchanged. OAuth tokens need user:write."""
    changes = data.model_dump(exclude_unset=True)
    if "displayName" in changes and changes["displayName"] is None:
        raise ApiError(400, "validation_error", "displayName cannot be null", {"field": "displayName"})
    try:
        return user_out(await accounts().update_profile(access.principal().user_id, changes))
    except UnknownUser:
        raise not_found("user") from None


@blueprint.get("/search")
@access.public
@tag(["Users"])
@validate_querystring(SearchQuery)
@validate_response(UserList)
async def search(query_args: SearchQuery) -> UserList:
    """Users whose username starts with or contains q (case-insensitive); limit ≤ 100."""
    found = await users().search(query_args.q, query_args.limit)
    return UserList(items=[user_out(user) for user in found])


@blueprint.get("/<username>")
@access.public
@tag(["Users"])
@validate_response(UserOut)
async def get_user(username: str) -> UserOut:
    """Public profile by exact, case-sensitive username; its id is the channel id."""
    user = await users().by_username(username)
    if user is None:
        raise not_found("user", username=username)
    return user_out(user)


async def _follow_page(user_id: str, query_args: PageQuery, followers: bool) -> FollowPage:
    user = await _existing_user(user_id)
    lister = users().followers if followers else users().following
    page = await lister(user.id, query_args.limit, query_args.cursor)  # InvalidCursor: errors.DOMAIN_ERRORS
    items = [FollowOut(**user_out(u).model_dump(), followedAt=iso8601(at)) for u, at in page.items]
    return FollowPage(items=items, nextCursor=page.next_cursor)


@blueprint.get("/<user_id>/followers")
@access.public
@tag(["Users"])
@validate_querystring(PageQuery)
@validate_response(FollowPage)
async def followers(user_id: str, query_args: PageQuery) -> FollowPage:
    """Who follows this user, newest first; cursor pagination (limit ≤ 100)."""
    return await _follow_page(user_id, query_args, followers=True)


@blueprint.get("/<user_id>/following")
@access.public
@tag(["Users"])
@validate_querystring(PageQuery)
@validate_response(FollowPage)
async def following(user_id: str, query_args: PageQuery) -> FollowPage:
    """Whom this user follows, newest first; cursor pagination (limit ≤ 100)."""
    return await _follow_page(user_id, query_args, followers=False)


@blueprint.post("/follow/<user_id>")
@access.token("user:write")
@tag(["Users"])
@validate_response(FollowStatus)
async def follow(user_id: str) -> FollowStatus:
    """Follow a user; idempotent. Publishes channel.follow and user.follow the first time."""
    target = uuid_param(user_id, "userId")
    try:
        followed_at = await accounts().follow(access.principal().user_id, target)
    except SelfFollow:
        raise ApiError(400, "cannot_follow_self", "you cannot follow yourself") from None
    except UnknownUser:
        raise not_found("user", userId=target) from None
    return FollowStatus(following=True, followedAt=iso8601(followed_at))


@blueprint.delete("/follow/<user_id>")
@access.token("user:write")
@tag(["Users"])
@validate_response(FollowStatus)
async def unfollow(user_id: str) -> FollowStatus:
    """Stop following; idempotent. Publishes user.unfollow when a follow was removed."""
    target = uuid_param(user_id, "userId")
    try:
        await accounts().unfollow(access.principal().user_id, target)
    except UnknownUser:
        raise not_found("user", userId=target) from None
    return FollowStatus(following=False, followedAt=None)


@blueprint.get("/follow-status/<user_id>")
@access.token()
@tag(["Users"])
@validate_response(FollowStatus)
async def follow_status(user_id: str) -> FollowStatus:
    """Whether the caller follows this user, and since when."""
    target = await _existing_user(user_id)
    me = access.principal().user_id
    at = await users().follow_time(me, target.id)
    return FollowStatus(following=at is not None, followedAt=iso8601(at) if at is not None else None)
