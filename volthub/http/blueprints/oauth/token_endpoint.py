"""The token endpoint (RFC 6749 §3.2, §4.1.3, §6) and token revocation (RFC 7009).

- `POST /api/developer/oauth/token`: `authorization_code` (PKCE S256 or plain) and
  `refresh_token` grants, form-encoded or JSON, client auth `client_secret_basic`,
  `client_secret_post`, or none for public clients. There is no client-credentials grant.
- `POST /api/developer/oauth/revoke`, with the same client authentication.

Errors of these endpoints use RFC 6749 §5.2 codes and carry both `message` (our error
model) and `error_description` (for RFC clients), with `Cache-Control: no-store`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field
from quart import Response, jsonify, request
from quart_schema import DataSource, document_request, document_response, tag

from volthub.http import access
from volthub.http.blueprints.oauth.common import (
    FORM,
    JSON,
    NO_STORE,
    apps,
    blueprint,
    oauth_service,
    request_params,
)
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError, error_response
from volthub.http.openapi import responds
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.protocol.oauth.client_auth import MalformedBasic, parse_basic
from volthub.protocol.oauth.scopes import InvalidScope, format_scope, parse_scope
from volthub.services.apps import App
from volthub.services.oauth import Issued, OAuthError, secret_matches
from volthub.services.tokens import ACCESS, TokenError

T = TypeVar("T")

GRANT_TYPES = ("authorization_code", "refresh_token")
# Errors of these endpoints are answered in RFC 6749 §5.2 shape.
_RFC_ENDPOINTS = frozenset({"oauth.token", "oauth.revoke"})
_RFC_CODES = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "unsupported_token_type",
    }
)


# --- errors -------------------------------------------------------------------------------------


def oauth_error(exc: OAuthError, basic_auth: bool = False) -> ApiError:
    """RFC 6749 §5.2: 400, or 401 with a challenge when Basic client auth failed."""
    headers = dict(NO_STORE)
    status = 400
    if exc.error == "invalid_client" and basic_auth:
        status = 401
        headers["WWW-Authenticate"] = 'Basic realm="volthub"'
    return ApiError(status, exc.error, exc.message, headers=headers, extra={"error_description": exc.message})


# Scoped to this blueprint and shaping only the two RFC endpoints' bodies (every other OAuth
# route keeps the app-wide error body): not a domain-error mapping, which is errors.py's.
@blueprint.errorhandler(ApiError)
async def _rfc_shaped(error: ApiError) -> Response:
    """Token and revoke endpoints answer RFC 6749 codes even for malformed bodies (415, bad JSON)."""
    if request.endpoint in _RFC_ENDPOINTS:
        if error.code not in _RFC_CODES and error.status in (400, 413, 415):
            error = ApiError(400, "invalid_request", error.message, error.details, error.headers, error.extra)
        error.extra.setdefault("error_description", error.message)
        error.headers = {**NO_STORE, **error.headers}
    return error_response(error)


# --- token endpoint -------------------------------------------------------------------------------


class TokenForm(Body):
    example = {
        "grant_type": "authorization_code",
        "code": "adaWave",
        "redirect_uri": "https://volthub.example/redirect_uri",
        "code_verifier": "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "refresh_token": "vh_rt_8HkP2vWq5nLs0cYd4mJe",
        "scope": "chat:read chat:write",
        "client_id": "0b7e2a4c-5d1f-4e8a-9c3b-19eb69210000",
        "client_secret": "vhs_Xr4p9Lm2Qz7Nw1Kb",
    }

    grant_type: str = Field(description="authorization_code or refresh_token")
    code: str | None = None
    redirect_uri: str | None = Field(None, description="required when the authorization request sent it")
    code_verifier: str | None = Field(None, description="PKCE verifier, when a code_challenge was sent")
    refresh_token: str | None = None
    scope: str | None = Field(None, description="refresh only: narrow the access token's scopes")
    client_id: str | None = Field(None, description="client_secret_post, or a public client")
    client_secret: str | None = Field(None, description="client_secret_post")


class TokenOut(Model):
    example = {
        "access_token": "vh_at_3q2Xb9Lk0sZpA1mN7rTq",
        "token_type": "Bearer",
        "expires_in": 1,
        "refresh_token": "vh_rt_8HkP2vWq5nLs0cYd4mJe",
        "scope": "chat:read chat:write",
    }

    access_token: str
    token_type: str = "Bearer"
    expires_in: int
    refresh_token: str
    scope: str


@dataclass(frozen=True)
class ClientCredentials:
    client_id: str | None
    secret: str | None
    basic: bool


def client_credentials(params: Mapping[str, str]) -> ClientCredentials:
    """client_secret_basic (RFC 6749 §2.3.1: form-encoded, then base64) or client_secret_post."""
    try:
        basic = parse_basic(request.headers.get("Authorization"))
    except MalformedBasic as exc:
        raise oauth_error(OAuthError("invalid_client", str(exc)), basic_auth=True) from None
    if basic is None:
        return ClientCredentials(params.get("client_id"), params.get("client_secret"), False)
    if "client_secret" in params:
        raise OAuthError("invalid_request", "use one client authentication method: Basic or client_secret, not both")
    if params.get("client_id") not in (None, basic.client_id):
        raise OAuthError("invalid_request", "client_id in the body differs from the Basic credentials")
    return ClientCredentials(basic.client_id, basic.secret or None, True)


async def _client_request(step: Callable[[Mapping[str, str], ClientCredentials], Awaitable[T]]) -> T:
    """`step` on the request's parameters and the client credentials it carries, as the token
    and the revocation endpoints take them; a refusal on the way is answered as these
    endpoints answer one (401 with a challenge only once Basic credentials were read)."""
    credentials = ClientCredentials(None, None, False)
    try:
        params = await request_params()
        credentials = client_credentials(params)
        return await step(params, credentials)
    except OAuthError as exc:
        raise oauth_error(exc, credentials.basic) from None


async def authenticate_client(credentials: ClientCredentials) -> App:
    client_id = credentials.client_id
    if not client_id:
        raise OAuthError(
            "invalid_client",
            "client authentication failed: send client_id (and client_secret unless the app is public)",
        )
    app = await apps().find(client_id)
    if app is None:
        raise OAuthError("invalid_client", "client authentication failed: unknown client_id")
    if app.is_public:
        if credentials.secret is not None:
            raise OAuthError("invalid_client", "this is a public client: it has no secret to send")
    elif credentials.secret is None:
        raise OAuthError(
            "invalid_client", "client_secret is required for this client (client_secret_basic or client_secret_post)"
        )
    elif not secret_matches(app, credentials.secret):
        raise OAuthError("invalid_client", "client authentication failed: wrong client_secret")
    return app


@blueprint.post("/api/developer/oauth/token")
@access.public
@access.accepts(FORM, JSON)
@limited("token")
@tag(["OAuth"])
@document_request(TokenForm, source=DataSource.FORM)
@document_response(TokenOut)
@error_responses(400, 401)
async def token() -> Any:
    """Exchange an authorization code, or a refresh token, for an access token.

    Form-encoded (RFC 6749) or JSON. Client authentication: `client_secret_basic`,
    `client_secret_post`, or `client_id` alone for public clients (which must have used
    PKCE). Refresh tokens rotate: each refresh returns a new one, and presenting a used one
    again revokes the whole grant. Access tokens expire after `expires_in` seconds.
    Errors: RFC 6749 §5.2 `error` plus `message` and `error_description`; 401 for
    `invalid_client` when Basic authentication was used.
    """
    return _token_response(await _client_request(_grant))


async def _grant(params: Mapping[str, str], credentials: ClientCredentials) -> Issued:
    grant_type = params.get("grant_type")
    if grant_type is None:
        raise OAuthError("invalid_request", "grant_type is required (authorization_code or refresh_token)")
    if grant_type not in GRANT_TYPES:
        raise OAuthError(
            "unsupported_grant_type",
            f"grant_type {grant_type[:64]!r} is not supported: use authorization_code or refresh_token",
        )
    app = await authenticate_client(credentials)
    return await (_by_code if grant_type == "authorization_code" else _by_refresh)(app, params)


async def _by_code(app: App, params: Mapping[str, str]) -> Issued:
    code = params.get("code")
    if code is None:
        raise OAuthError("invalid_request", "code is required")
    return await oauth_service().exchange_code(
        app.client_id, code, params.get("redirect_uri"), params.get("code_verifier")
    )


async def _by_refresh(app: App, params: Mapping[str, str]) -> Issued:
    refresh_token = params.get("refresh_token")
    if refresh_token is None:
        raise OAuthError("invalid_request", "refresh_token is required")
    requested = None
    if params.get("scope") is not None:
        try:
            requested = format_scope(parse_scope(params["scope"]).requested)
        except InvalidScope as exc:
            raise OAuthError("invalid_scope", str(exc)) from None
    return await oauth_service().refresh(app.client_id, refresh_token, requested)


def _token_response(issued: Issued) -> Response:
    rt = runtime()
    ttl = rt.settings.oauth.access_token_ttl_seconds
    access_token, _ = rt.tokens.issue_access(issued.user_id, issued.client_id, issued.scope, issued.grant_id, ttl)
    body = TokenOut(access_token=access_token, expires_in=ttl, refresh_token=issued.refresh_token, scope=issued.scope)
    response = jsonify(body.model_dump())
    response.headers.update(NO_STORE)
    return response


# --- revocation (RFC 7009) --------------------------------------------------------------------------


class RevokeForm(Body):
    example = {
        "token": "vh_at_3q2Xb9Lk0sZpA1mN7rTq",
        "token_type_hint": "access_token",
        "client_id": "0b7e2a4c-5d1f-4e8a-9c3b-19eb69210000",
        "client_secret": "vhs_Xr4p9Lm2Qz7Nw1Kb",
    }

    token: str = Field(description="an access token or a refresh token")
    token_type_hint: str | None = Field(None, description="access_token or refresh_token (optional)")
    client_id: str | None = None
    client_secret: str | None = None


@blueprint.post("/api/developer/oauth/revoke")
@access.public
@access.accepts(FORM, JSON)
@tag(["OAuth"])
@document_request(RevokeForm, source=DataSource.FORM)
@error_responses(400, 401)
@responds(200, "Revoked, or nothing to revoke (RFC 7009 §2.2); the body is empty")
async def revoke() -> Any:
    """Revoke a token (RFC 7009); client authentication as at the token endpoint.

    Revoking a refresh token revokes its grant. Access tokens are stateless JWTs, so revoking
    one revokes its whole grant too (its refresh token and every access token of it). An
    unknown, expired or already revoked token still gets 200. A token issued to another
    client is refused with `unauthorized_client`.
    """
    await _client_request(_revocation)
    return Response("", status=200, headers=NO_STORE)


async def _revocation(params: Mapping[str, str], credentials: ClientCredentials) -> None:
    token_value = params.get("token")
    if token_value is None:
        raise OAuthError("invalid_request", "token is required")
    await _revoke(await authenticate_client(credentials), token_value)


async def _revoke(app: App, token_value: str) -> None:
    service = oauth_service()
    if token_value.count(".") == 2:  # a JWT: our access tokens
        try:
            claims = runtime().tokens.verify(token_value)
        except TokenError:
            return  # expired or not ours: nothing to revoke
        if claims.kind == ACCESS and claims.grant_id is not None:
            await service.revoke_grant_for_client(app.client_id, claims.grant_id)
        return
    await service.revoke_refresh_token(app.client_id, token_value)
