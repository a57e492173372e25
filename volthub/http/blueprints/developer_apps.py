"""Developer apps: OAuth clients, managed by their owner.

First-party tokens only. An app owned by someone else is a 404, as if it did not exist.
The client secret is shown only in the create and rotate-secret responses; it is stored as
a SHA-256 digest. An app created with `"public": true` has no secret (a browser or native
app that cannot keep one): it authenticates at the token endpoint by `client_id` alone and
must use PKCE. Redirect URIs are matched exactly (volthub.protocol.oauth.redirects).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, field_validator
from quart import Blueprint, Response
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model, example_of
from volthub.hub.clock import iso8601
from volthub.protocol.oauth.redirects import InvalidRedirectURI, validate_registered_uri
from volthub.protocol.oauth.scopes import SCOPES
from volthub.services.apps import App, AppFields, Apps

blueprint = Blueprint("developer_apps", __name__, url_prefix="/api/developer/apps")

MAX_REDIRECT_URIS = 10


def _redirect_uri(value: str) -> str:
    try:
        return validate_registered_uri(value)
    except InvalidRedirectURI as exc:
        raise ValueError(exc.message) from None


RedirectUri = Annotated[str, AfterValidator(_redirect_uri)]


def _name(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("name must not be blank")
    return value.strip() if value is not None else None


def _logo(value: str | None) -> str | None:
    """https only: the consent page shows nothing else, and http would leak who consents."""
    if not value:
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError("logoUrl must be an https:// URL") from None
    if parts.scheme != "https" or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError("logoUrl must be an https:// URL")
    return value


def _unique(uris: list[str] | None) -> list[str] | None:
    if uris is not None and len(set(uris)) != len(uris):
        raise ValueError("redirectUris must not repeat a URI")
    return uris


class _AppChecks(Body):
    """Checks shared by the create and patch bodies."""

    @field_validator("name", check_fields=False)
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        return _name(value)

    @field_validator("logoUrl", check_fields=False)
    @classmethod
    def _check_logo(cls, value: str | None) -> str | None:
        return _logo(value)

    @field_validator("redirectUris", check_fields=False)
    @classmethod
    def _check_uris(cls, value: list[str] | None) -> list[str] | None:
        return _unique(value)


class AppCreateBody(_AppChecks):
    example = {
        "name": "Speedrun Club",
        "redirectUris": ["https://volthub.example/redirectUri"],
        "description": "",
        "logoUrl": "https://volthub.example/logoUrl",
        "botApp": False,
        "public": False,
    }

    name: str = Field(min_length=1, max_length=50)
    redirectUris: list[RedirectUri] = Field(default_factory=list, max_length=MAX_REDIRECT_URIS)
    description: str = Field("", max_length=500)
    logoUrl: str | None = Field(None, max_length=2048)
    botApp: bool = False
    public: bool = Field(False, description="true: a public client with no secret; it must use PKCE")


class AppPatchBody(_AppChecks):
    example = {
        "name": "Speedrun Club",
        "redirectUris": ["https://volthub.example/redirectUri"],
        "description": "Speedruns and chill every Friday.",
        "logoUrl": "https://volthub.example/logoUrl",
        "botApp": False,
    }

    name: str | None = Field(None, min_length=1, max_length=50)
    redirectUris: list[RedirectUri] | None = Field(None, max_length=MAX_REDIRECT_URIS)
    description: str | None = Field(None, max_length=500)
    logoUrl: str | None = Field(None, max_length=2048, description="null removes the logo")
    botApp: bool | None = None


class AppOut(Model):
    example = {
        "clientId": "0b7e2a4c-5d1f-4e8a-9c3b-ea1ce9be0000",
        "name": "Speedrun Club",
        "description": "Speedruns and chill every Friday.",
        "logoUrl": "https://volthub.example/logoUrl",
        "redirectUris": ["https://volthub.example/redirectUri"],
        "botApp": False,
        "public": False,
        "reviewed": False,
        "createdAt": "2026-03-14T18:30:00Z",
        "updatedAt": "2026-03-14T18:30:00Z",
    }

    clientId: str
    name: str
    description: str
    logoUrl: str | None
    redirectUris: list[str]
    botApp: bool
    public: bool
    reviewed: bool = Field(description="set by an operator (`volthub apps review`); shown on the consent screen")
    createdAt: str
    updatedAt: str


class AppWithSecretOut(AppOut):
    example = {**example_of(AppOut), "clientSecret": "vhs_Xr4p9Lm2Qz7Nw1Kb"}

    clientSecret: str | None = Field(description="shown only now; null for a public client")


class AppList(Model):
    example = {"items": [example_of(AppOut)]}

    items: list[AppOut]


class ScopeGrantOut(Model):
    name: str
    category: str
    description: str
    sensitive: bool
    granted: bool = Field(description="whether the app may request it now")
    grantedAt: str | None = Field(description="when an operator granted this sensitive scope")


class AppScopes(Model):
    example = {
        "reviewRequired": False,
        "scopes": [
            {
                "name": "Speedrun Club",
                "category": "Just Chatting",
                "description": "Speedruns and chill every Friday.",
                "sensitive": False,
                "granted": False,
                "grantedAt": "2026-03-14T18:30:00Z",
            }
        ],
    }

    reviewRequired: bool = Field(description="[oauth] sensitive_scopes_need_review")
    scopes: list[ScopeGrantOut]


def app_out(app: App) -> AppOut:
    return AppOut.from_record(app, public=app.is_public)


def _with_secret(app: App, secret: str | None) -> AppWithSecretOut:
    return AppWithSecretOut(**app_out(app).model_dump(), clientSecret=secret)


def apps() -> Apps:
    return runtime().services.apps


@blueprint.get("")
@access.first_party
@tag(["Developer apps"])
@validate_response(AppList)
async def list_apps() -> AppList:
    """The caller's apps, oldest first."""
    found = await apps().of_owner(access.principal().user_id)
    return AppList(items=[app_out(app) for app in found])


@blueprint.post("")
@access.first_party
@access.large_body
@limited("app_create")
@tag(["Developer apps"])
@validate_request(AppCreateBody)
@validate_response(AppWithSecretOut, 201)
async def create_app(data: AppCreateBody) -> tuple[AppWithSecretOut, int]:
    """Create an app. The response holds `clientSecret`, shown only here and on rotation.

    Redirect URIs: https, http on a loopback host, or a reverse-DNS app scheme; no
    fragments or wildcards; matched exactly. An app without one can be created but cannot
    be authorised until one is added. `public: true` creates a client without a secret,
    which must use PKCE. At most 5 apps per hour per user.
    """
    app, secret = await apps().create(access.principal().user_id, data.to_dataclass(AppFields))
    return _with_secret(app, secret), 201


@blueprint.get("/<client_id>")
@access.first_party
@tag(["Developer apps"])
@validate_response(AppOut)
async def get_app(client_id: str) -> AppOut:
    """One of the caller's apps (never its secret)."""
    return app_out(await apps().owned(access.principal().user_id, client_id))


# Body field -> the app record's field, for PATCH.
_EDITABLE = {
    "name": "name",
    "description": "description",
    "logoUrl": "logo_url",
    "redirectUris": "redirect_uris",
    "botApp": "bot_app",
}


@blueprint.patch("/<client_id>")
@access.first_party
@access.large_body
@tag(["Developer apps"])
@validate_request(AppPatchBody)
@validate_response(AppOut)
async def update_app(client_id: str, data: AppPatchBody) -> AppOut:
    """Change name, description, logo, redirect URIs or the bot flag; omitted fields stay.
    Whether an app is public is fixed at creation."""
    me = access.principal().user_id
    await apps().owned(me, client_id)  # 404 before any validation error
    sent = data.model_dump(exclude_unset=True)
    for field in ("name", "redirectUris", "botApp"):
        if field in sent and sent[field] is None:
            raise ApiError(400, "validation_error", f"{field} cannot be null", {"field": field})
    changes: dict[str, Any] = {_EDITABLE[key]: value for key, value in sent.items()}
    if "description" in changes and changes["description"] is None:
        changes["description"] = ""
    return app_out(await apps().update(me, client_id, changes))


@blueprint.delete("/<client_id>")
@access.first_party
@tag(["Developer apps"])
async def delete_app(client_id: str) -> Response:
    """Delete the app. Every user's grant to it is revoked first (their tokens stop working,
    `user.authorization.revoke` is published); its webhooks go with it."""
    await apps().delete(access.principal().user_id, client_id)
    return Response("", status=204)


@blueprint.post("/<client_id>/rotate-secret")
@access.first_party
@tag(["Developer apps"])
@validate_response(AppWithSecretOut)
async def rotate_secret(client_id: str) -> AppWithSecretOut:
    """Replace the client secret; the old one stops working at once. Issued tokens are kept.
    A public app has no secret: 400 `public_client`."""
    rotated, secret = await apps().rotate_secret(access.principal().user_id, client_id)
    return _with_secret(rotated, secret)


@blueprint.get("/<client_id>/scopes")
@access.first_party
@tag(["Developer apps"])
@validate_response(AppScopes)
async def app_scopes(client_id: str) -> AppScopes:
    """Which scopes the app may request. Sensitive scopes need an operator's grant
    (`volthub apps grant CLIENT_ID SCOPE`) while `[oauth] sensitive_scopes_need_review`."""
    rt = runtime()
    grants = await apps().scope_grants(access.principal().user_id, client_id)
    allowed = rt.services.oauth.allowed({s.name for s in SCOPES}, grants)
    items = [
        ScopeGrantOut.from_record(
            s,
            granted=s.name in allowed,
            grantedAt=iso8601(grants[s.name]) if s.sensitive and s.name in grants else None,
        )
        for s in SCOPES
    ]
    return AppScopes(reviewRequired=rt.settings.oauth.sensitive_scopes_need_review, scopes=items)
