"""The authorization endpoint (RFC 6749 §4.1.1, RFC 7636 §4.3) as a JSON API.

`GET /api/developer/oauth/authorize` previews a request for a consent screen (public);
`POST` completes it with the consenting user's first-party token. The HTML consent page at
`/oauth/authorize` (blueprints/consent.py) runs the same checks (`check_authorize`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field
from quart import jsonify, request
from quart_schema import document_querystring, document_request, document_response, tag

from volthub.http import access
from volthub.http.blueprints.oauth.common import (
    MAX_PARAM_LENGTH,
    apps,
    blueprint,
    json_values,
    oauth_service,
    single_values,
)
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model, Query
from volthub.protocol.oauth import pkce, redirects
from volthub.protocol.oauth.scopes import InvalidScope, format_scope, group_for_consent, parse_scope
from volthub.services.apps import App
from volthub.services.oauth import OAuthError

# --- authorize (shared with the consent page) ------------------------------------------------------


@dataclass(frozen=True)
class AuthorizeRequest:
    app: App
    redirect_uri: str
    redirect_uri_sent: bool
    scope: str  # canonical, legacy strings kept as sent
    state: str | None
    code_challenge: str | None
    code_challenge_method: str | None

    def consent_groups(self) -> list[dict[str, Any]]:
        return group_for_consent(self.scope)

    def redirect(self, params: Mapping[str, str | None]) -> str:
        return redirects.build_redirect(self.redirect_uri, {**params, "state": self.state})


class AuthorizeError(Exception):
    """Refused authorize request. `redirect_uri` is set only once the client and redirect URI
    are verified: before that the error must not redirect (RFC 6749 §4.1.2.1)."""

    def __init__(self, error: str, message: str, redirect_uri: str | None = None, state: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.redirect_uri = redirect_uri
        self.state = state

    @property
    def redirect_url(self) -> str | None:
        if self.redirect_uri is None:
            return None
        params = {"error": self.error, "error_description": self.message, "state": self.state}
        return redirects.build_redirect(self.redirect_uri, params)

    def api_error(self) -> ApiError:
        extra: dict[str, Any] = {"error_description": self.message}
        if self.redirect_url is not None:
            extra["redirectUrl"] = self.redirect_url
        return ApiError(400, self.error, self.message, extra=extra)


async def _client_and_redirect(params: Mapping[str, str]) -> tuple[App, str]:
    client_id = params.get("client_id")
    if not client_id:
        raise AuthorizeError("invalid_request", "client_id is required")
    app = await apps().find(client_id)
    if app is None:
        raise AuthorizeError("invalid_client", "unknown client_id: no app has this client id")
    if not app.redirect_uris:
        raise AuthorizeError(
            "invalid_request",
            "this app has no redirect URI registered, so it cannot be authorised; its developer must add one",
        )
    redirect_uri = redirects.match_redirect_uri(params.get("redirect_uri"), app.redirect_uris)
    if redirect_uri is None:
        message = (
            "redirect_uri does not exactly match any redirect URI registered for this app"
            if params.get("redirect_uri")
            else "redirect_uri is required: this app registered more than one"
        )
        raise AuthorizeError("invalid_request", message)
    return app, redirect_uri


async def check_authorize(params: Mapping[str, str]) -> AuthorizeRequest:
    """Validate an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3)."""
    app, redirect_uri = await _client_and_redirect(params)
    state = params.get("state")
    if state is not None and len(state) > MAX_PARAM_LENGTH:
        raise AuthorizeError("invalid_request", f"state is longer than {MAX_PARAM_LENGTH} characters", redirect_uri)

    def fail(error: str, message: str) -> AuthorizeError:
        return AuthorizeError(error, message, redirect_uri, state)

    too_long = [k for k, v in params.items() if len(v) > MAX_PARAM_LENGTH]
    if too_long:
        raise fail("invalid_request", f"{too_long[0][:64]} is longer than {MAX_PARAM_LENGTH} characters")
    response_type = params.get("response_type")
    if response_type is None:
        raise fail("invalid_request", "response_type is required (code)")
    if response_type != "code":
        raise fail("unsupported_response_type", "only response_type=code is supported")
    scope = await _checked_scope(app, params.get("scope"), fail)
    challenge, method = _checked_pkce(app, params, fail)
    return AuthorizeRequest(app, redirect_uri, bool(params.get("redirect_uri")), scope, state, challenge, method)


async def _checked_scope(app: App, raw: str | None, fail: Any) -> str:
    try:
        requested = parse_scope(raw)
    except InvalidScope as exc:
        raise fail("invalid_scope", str(exc)) from None
    service = oauth_service()
    grants = await service.operator_grants(app.client_id)
    lacking = service.missing_review(str(requested), grants)
    if lacking:
        names = ", ".join(lacking)
        raise fail(
            "invalid_scope",
            f"sensitive scope not granted to this app: {names}; an operator must review the app and grant it first",
        )
    return format_scope(requested.requested)


def _checked_pkce(app: App, params: Mapping[str, str], fail: Any) -> tuple[str | None, str | None]:
    challenge, method = params.get("code_challenge"), params.get("code_challenge_method")
    try:
        pkce.validate_challenge(challenge, method)
    except pkce.PKCEError as exc:
        raise fail("invalid_request", str(exc)) from None
    settings = runtime().settings.oauth
    if challenge is None:
        if app.is_public:
            raise fail("invalid_request", "this is a public client: it must use PKCE (code_challenge, S256)")
        if settings.require_pkce_for_confidential:
            raise fail("invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256")
        return None, None
    method = pkce.effective_method(method)
    # RFC 9700 §2.1.1: plain protects nothing once the challenge leaks; never for public
    # clients, and for confidential ones only when an operator allows it.
    if method == "plain" and app.is_public:
        raise fail("invalid_request", "code_challenge_method=plain is not allowed for public clients; use S256")
    if method == "plain" and not settings.allow_plain_pkce:
        raise fail("invalid_request", "code_challenge_method=plain is not allowed here; use S256")
    return challenge, method


async def issue_code(user_id: str, checked: AuthorizeRequest) -> str:
    return await oauth_service().issue_code(
        user_id=user_id,
        client_id=checked.app.client_id,
        redirect_uri=checked.redirect_uri,
        redirect_uri_sent=checked.redirect_uri_sent,
        scope=checked.scope,
        code_challenge=checked.code_challenge,
        code_challenge_method=checked.code_challenge_method,
    )


# --- authorize API ---------------------------------------------------------------------------------


class AuthorizeQuery(Query):
    response_type: str = Field(description="code")
    client_id: str
    redirect_uri: str | None = Field(None, description="required when the app registered several")
    scope: str | None = Field(None, description="space-separated scopes; legacy aliases accepted")
    state: str | None = Field(None, description="echoed back on the redirect")
    code_challenge: str | None = Field(None, description="PKCE (RFC 7636); required for public clients")
    code_challenge_method: str | None = Field(None, description="S256 (recommended) or plain")


class AuthorizeBody(Body):
    example = {
        "response_type": "code",
        "client_id": "0b7e2a4c-5d1f-4e8a-9c3b-19eb69210000",
        "redirect_uri": "https://volthub.example/redirect_uri",
        "scope": "chat:read chat:write",
        "state": "open",
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256",
        "approve": False,
    }

    response_type: str
    client_id: str
    redirect_uri: str | None = None
    scope: str | None = None
    state: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None
    approve: bool = Field(description="true grants (a code is issued), false denies (error=access_denied)")


class PreviewApp(Model):
    clientId: str
    name: str
    description: str
    logoUrl: str | None
    reviewed: bool


class PreviewScope(Model):
    name: str
    description: str
    sensitive: bool


class PreviewGroup(Model):
    category: str
    scopes: list[PreviewScope]


class AuthorizePreview(Model):
    example = {
        "app": {
            "clientId": "0b7e2a4c-5d1f-4e8a-9c3b-ea1ce9be0000",
            "name": "Speedrun Club",
            "description": "Speedruns and chill every Friday.",
            "logoUrl": "https://volthub.example/logoUrl",
            "reviewed": False,
        },
        "redirectUri": "https://volthub.example/redirectUri",
        "state": "open",
        "scopes": [
            {
                "category": "Just Chatting",
                "scopes": [
                    {"name": "Speedrun Club", "description": "Speedruns and chill every Friday.", "sensitive": False}
                ],
            }
        ],
    }

    app: PreviewApp
    redirectUri: str
    state: str | None
    scopes: list[PreviewGroup]


class AuthorizeResult(Model):
    example = {"code": "adaWave", "state": "open", "redirectUrl": "https://volthub.example/redirectUrl"}

    code: str | None = Field(None, description="absent when the user denied")
    state: str | None = None
    redirectUrl: str = Field(
        description="where to send the user: the redirect URI with code and state, or error=access_denied"
    )


@blueprint.get("/api/developer/oauth/authorize")
@access.public
@tag(["OAuth"])
@document_querystring(AuthorizeQuery)
@document_response(AuthorizePreview)
async def authorize_preview() -> Any:
    """Preview an authorization request for a consent screen: the app, and the requested
    scopes grouped by category with sensitive ones marked.

    Errors are 400 with RFC 6749 codes (`invalid_request`, `invalid_client`,
    `unsupported_response_type`, `invalid_scope`) plus `message`; once the client and
    redirect URI are verified, the error also carries `redirectUrl` (the redirect URI with
    the error) to send the user back to the app.
    """
    try:
        checked = await check_authorize(single_values(request.args))
    except OAuthError as exc:
        raise AuthorizeError(exc.error, exc.message).api_error() from None
    except AuthorizeError as exc:
        raise exc.api_error() from None
    return jsonify(_preview(checked).model_dump())


def _preview(checked: AuthorizeRequest) -> AuthorizePreview:
    return AuthorizePreview(
        app=PreviewApp.from_record(checked.app),
        redirectUri=checked.redirect_uri,
        state=checked.state,
        scopes=[PreviewGroup.model_validate(group) for group in checked.consent_groups()],
    )


@blueprint.post("/api/developer/oauth/authorize")
@access.first_party
@tag(["OAuth"])
@document_request(AuthorizeBody)
@document_response(AuthorizeResult)
async def authorize_complete() -> Any:
    """Complete an authorization request as the signed-in user (first-party token only).

    `approve: true` → `{code, state, redirectUrl}`: a single-use code, valid 10 minutes, bound
    to the client, redirect URI and PKCE challenge. `approve: false` →
    `{redirectUrl}` carrying `error=access_denied`. Errors as for the preview.
    """
    try:
        params = json_values(await request.get_json(), keep=("approve",))
        approve = params.pop("approve", None)
        checked = await check_authorize(params)
    except OAuthError as exc:
        raise AuthorizeError(exc.error, exc.message).api_error() from None
    except AuthorizeError as exc:
        raise exc.api_error() from None
    if not isinstance(approve, bool):
        raise AuthorizeError(
            "invalid_request", "approve must be true or false", checked.redirect_uri, checked.state
        ).api_error()
    if not approve:
        url = checked.redirect({"error": "access_denied", "error_description": "the user denied the request"})
        return jsonify({"redirectUrl": url})
    code = await issue_code(access.principal().user_id, checked)
    return jsonify({"code": code, "state": checked.state, "redirectUrl": checked.redirect({"code": code})})
