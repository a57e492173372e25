"""OAuth 2.0 for third-party apps (spec §4.3, §5; DESIGN §4): authorize, token, revoke, metadata.

- `GET /api/developer/oauth/authorize` previews a request for a consent screen (public);
  `POST` completes it with the consenting user's first-party token. The HTML consent page
  at `/oauth/authorize` (blueprints/consent.py) runs the same checks (`check_authorize`).
- `POST /api/developer/oauth/token`: `authorization_code` (PKCE S256 or plain) and
  `refresh_token` grants, form-encoded or JSON, client auth `client_secret_basic`,
  `client_secret_post`, or none for public clients. There is no client-credentials grant.
- `POST /api/developer/oauth/revoke` (RFC 7009); `/.well-known/oauth-authorization-server`
  (RFC 8414); a user's connected apps under `/api/users/me/connections`.

Errors of the token and revoke endpoints use RFC 6749 §5.2 codes and carry both `message`
(our error model) and `error_description` (for RFC clients), with `Cache-Control: no-store`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from pydantic import Field
from quart import Blueprint, Response, jsonify, request
from quart_schema import DataSource, document_querystring, document_request, document_response, tag

from volthub.http import access
from volthub.http.errors import ApiError, error_response, not_found
from volthub.http.ratelimit import limited
from volthub.http.runtime import Runtime, runtime
from volthub.http.schemas import Body, Model, Query
from volthub.hub.clock import iso8601, to_ms
from volthub.persistence import apps as apps_repo
from volthub.persistence import oauth as oauth_repo
from volthub.persistence import secrets as secret_store
from volthub.persistence.apps import App
from volthub.protocol.oauth import pkce, redirects
from volthub.protocol.oauth.scopes import (
    SCOPE_NAMES,
    SENSITIVE_SCOPES,
    InvalidScope,
    catalogue_document,
    effective_scopes,
    format_scope,
    group_for_consent,
    parse_scope,
)
from volthub.services.oauth import (
    Issued,
    OAuthError,
    OAuthPolicy,
    OAuthService,
    ScopeRules,
    secret_matches,
)
from volthub.services.tokens import ACCESS, Claims, TokenError

blueprint = Blueprint("oauth", __name__)

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
GRANT_TYPES = ("authorization_code", "refresh_token")
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
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
# No OAuth parameter we use is anywhere near this; longer ones are refused, not echoed.
MAX_PARAM_LENGTH = 4096


# --- wiring -------------------------------------------------------------------------------------


async def install(rt: Runtime) -> None:
    """Start-up hook: the OAuth service, the access-token grant check, the CSRF key."""
    settings = rt.settings.oauth
    rules = ScopeRules(effective_scopes, format_scope, SENSITIVE_SCOPES, pkce.verify)
    policy = OAuthPolicy(
        access_ttl=settings.access_token_ttl_seconds,
        refresh_ttl=settings.refresh_token_ttl_seconds,
        code_ttl=settings.code_ttl_seconds,
        need_review=settings.sensitive_scopes_need_review,
        cache_seconds=settings.grant_cache_seconds,
    )
    service = OAuthService(rt.db, rt.events, rt.clock, rules, policy)
    rt.services["oauth"] = service

    async def grant_lookup(claims: Claims) -> frozenset[str] | None:
        """volthub.http.access: the effective scopes of an access token, None once revoked."""
        if claims.grant_id is None or claims.client_id is None:
            return None
        held = await service.held_scopes(claims.grant_id, claims.user_id, claims.client_id)
        return None if held is None else effective_scopes(claims.scope) & held

    rt.services["grant_lookup"] = grant_lookup
    rt.services["oauth_csrf_key"] = await rt.db.write(
        secret_store.get_or_create("oauth_csrf_key", to_ms(rt.clock.now()))
    )


def oauth_service() -> OAuthService:
    return runtime().services["oauth"]


# --- errors -------------------------------------------------------------------------------------


def oauth_error(exc: OAuthError, basic_auth: bool = False) -> ApiError:
    """RFC 6749 §5.2: 400, or 401 with a challenge when Basic client auth failed."""
    headers = dict(NO_STORE)
    status = 400
    if exc.error == "invalid_client" and basic_auth:
        status = 401
        headers["WWW-Authenticate"] = 'Basic realm="volthub"'
    return ApiError(status, exc.error, exc.message, headers=headers, extra={"error_description": exc.message})


@blueprint.errorhandler(ApiError)
async def _rfc_shaped(error: ApiError) -> Response:
    """Token and revoke endpoints answer RFC 6749 codes even for malformed bodies (415, bad JSON)."""
    if request.endpoint in _RFC_ENDPOINTS:
        if error.code not in _RFC_CODES and error.status in (400, 413, 415):
            error = ApiError(400, "invalid_request", error.message, error.details, error.headers, error.extra)
        error.extra.setdefault("error_description", error.message)
        error.headers = {**NO_STORE, **error.headers}
    return error_response(error)


# --- shared request parsing -------------------------------------------------------------------------


def single_values(values: Any) -> dict[str, str]:
    """A query or form MultiDict as plain strings. RFC 6749 §3.1: no parameter twice;
    a parameter sent without a value is treated as omitted."""
    found: dict[str, str] = {}
    for key in values:
        items = values.getlist(key)
        if len(items) > 1:
            raise OAuthError("invalid_request", f"{key[:64]} was sent more than once")
        if items[0] != "":
            found[key] = items[0]
    return found


def json_values(data: Any, *, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON object's string members (and the `keep` ones whatever their type)."""
    if not isinstance(data, dict):
        raise OAuthError("invalid_request", "the request body must be a JSON object")
    found: dict[str, Any] = {}
    for key, value in data.items():
        if key in keep:
            found[key] = value
        elif value is None or value == "":
            continue
        elif not isinstance(value, str):
            raise OAuthError("invalid_request", f"{key[:64]} must be a string")
        else:
            found[key] = value
    return found


async def request_params() -> dict[str, str]:
    """Token and revocation parameters: form-encoded (RFC 6749) or JSON."""
    if request.is_json:
        return json_values(await request.get_json())
    return single_values(await request.form)


def plausible_client_id(value: str) -> bool:
    """Worth looking up: printable ASCII of sane length (PostgreSQL refuses NUL in text)."""
    return 0 < len(value) <= 256 and value.isascii() and value.isprintable()


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
    app = (
        await runtime().db.read(lambda tx: apps_repo.get_app(tx, client_id)) if plausible_client_id(client_id) else None
    )
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
    grants = await runtime().db.read(lambda tx: oauth_repo.app_scope_grants(tx, app.client_id))
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
    app: PreviewApp
    redirectUri: str
    state: str | None
    scopes: list[PreviewGroup]


class AuthorizeResult(Model):
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
    app = checked.app
    return AuthorizePreview(
        app=PreviewApp(
            clientId=app.client_id,
            name=app.name,
            description=app.description,
            logoUrl=app.logo_url,
            reviewed=app.reviewed,
        ),
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


# --- token endpoint -------------------------------------------------------------------------------


class OAuthErrorBody(Model):
    error: str = Field(
        description="RFC 6749 §5.2 code: invalid_request, invalid_client, invalid_grant, unauthorized_client, unsupported_grant_type, invalid_scope"
    )
    message: str
    error_description: str = Field(description="the same text as message, for RFC 6749 clients")


class TokenForm(Body):
    grant_type: str = Field(description="authorization_code or refresh_token")
    code: str | None = None
    redirect_uri: str | None = Field(None, description="required when the authorization request sent it")
    code_verifier: str | None = Field(None, description="PKCE verifier, when a code_challenge was sent")
    refresh_token: str | None = None
    scope: str | None = Field(None, description="refresh only: narrow the access token's scopes")
    client_id: str | None = Field(None, description="client_secret_post, or a public client")
    client_secret: str | None = Field(None, description="client_secret_post")


class TokenOut(Model):
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
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return ClientCredentials(params.get("client_id"), params.get("client_secret"), False)
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise oauth_error(OAuthError("invalid_client", "malformed Basic credentials"), basic_auth=True) from None
    raw_id, colon, raw_secret = decoded.partition(":")
    if not colon:
        raise oauth_error(OAuthError("invalid_client", "malformed Basic credentials"), basic_auth=True)
    client_id, secret = unquote_plus(raw_id), unquote_plus(raw_secret)
    if "client_secret" in params:
        raise OAuthError("invalid_request", "use one client authentication method: Basic or client_secret, not both")
    if params.get("client_id") not in (None, client_id):
        raise OAuthError("invalid_request", "client_id in the body differs from the Basic credentials")
    return ClientCredentials(client_id, secret or None, True)


async def authenticate_client(credentials: ClientCredentials) -> App:
    client_id = credentials.client_id
    if not client_id:
        raise OAuthError(
            "invalid_client",
            "client authentication failed: send client_id (and client_secret unless the app is public)",
        )
    app = (
        await runtime().db.read(lambda tx: apps_repo.get_app(tx, client_id)) if plausible_client_id(client_id) else None
    )
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
@document_response(OAuthErrorBody, 400)
@document_response(OAuthErrorBody, 401)
async def token() -> Any:
    """Exchange an authorization code, or a refresh token, for an access token.

    Form-encoded (RFC 6749) or JSON. Client authentication: `client_secret_basic`,
    `client_secret_post`, or `client_id` alone for public clients (which must have used
    PKCE). Refresh tokens rotate: each refresh returns a new one, and presenting a used one
    again revokes the whole grant. Access tokens expire after `expires_in` seconds.
    Errors: RFC 6749 §5.2 `error` plus `message` and `error_description`; 401 for
    `invalid_client` when Basic authentication was used.
    """
    credentials = ClientCredentials(None, None, False)
    try:
        params = await request_params()
        credentials = client_credentials(params)
        grant_type = params.get("grant_type")
        if grant_type is None:
            raise OAuthError("invalid_request", "grant_type is required (authorization_code or refresh_token)")
        if grant_type not in GRANT_TYPES:
            raise OAuthError(
                "unsupported_grant_type",
                f"grant_type {grant_type[:64]!r} is not supported: use authorization_code or refresh_token",
            )
        app = await authenticate_client(credentials)
        issued = await (_by_code if grant_type == "authorization_code" else _by_refresh)(app, params)
    except OAuthError as exc:
        raise oauth_error(exc, credentials.basic) from None
    return _token_response(issued)


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
    assert rt.tokens is not None
    access_token, _ = rt.tokens.issue_access(issued.user_id, issued.client_id, issued.scope, issued.grant_id, ttl)
    body = TokenOut(access_token=access_token, expires_in=ttl, refresh_token=issued.refresh_token, scope=issued.scope)
    response = jsonify(body.model_dump())
    response.headers.update(NO_STORE)
    return response


# --- revocation (RFC 7009) --------------------------------------------------------------------------


class RevokeForm(Body):
    token: str = Field(description="an access token or a refresh token")
    token_type_hint: str | None = Field(None, description="access_token or refresh_token (optional)")
    client_id: str | None = None
    client_secret: str | None = None


@blueprint.post("/api/developer/oauth/revoke")
@access.public
@access.accepts(FORM, JSON)
@tag(["OAuth"])
@document_request(RevokeForm, source=DataSource.FORM)
@document_response(OAuthErrorBody, 400)
@document_response(OAuthErrorBody, 401)
async def revoke() -> Any:
    """Revoke a token (RFC 7009); client authentication as at the token endpoint.

    Revoking a refresh token revokes its grant. Access tokens are stateless JWTs, so revoking
    one revokes its whole grant too (its refresh token and every access token of it). An
    unknown, expired or already revoked token still gets 200. A token issued to another
    client is refused with `unauthorized_client`.
    """
    credentials = ClientCredentials(None, None, False)
    try:
        params = await request_params()
        credentials = client_credentials(params)
        token_value = params.get("token")
        if token_value is None:
            raise OAuthError("invalid_request", "token is required")
        app = await authenticate_client(credentials)
        await _revoke(app, token_value)
    except OAuthError as exc:
        raise oauth_error(exc, credentials.basic) from None
    return Response("", status=200, headers=NO_STORE)


async def _revoke(app: App, token_value: str) -> None:
    service = oauth_service()
    if token_value.count(".") == 2:  # a JWT: our access tokens
        try:
            claims = runtime().tokens.verify(token_value)  # type: ignore[union-attr]
        except TokenError:
            return  # expired or not ours: nothing to revoke
        if claims.kind == ACCESS and claims.grant_id is not None:
            await service.revoke_grant_for_client(app.client_id, claims.grant_id)
        return
    await service.revoke_refresh_token(app.client_id, token_value)


# --- catalogue and metadata --------------------------------------------------------------------------


class ScopeInfo(Model):
    name: str
    category: str
    description: str
    sensitive: bool


class ScopeCatalogue(Model):
    scopes: list[ScopeInfo]
    aliases: dict[str, str | None] = Field(
        description="legacy scope string -> the real scope it grants (null: nothing extra)"
    )


@blueprint.get("/api/developer/oauth/scopes")
@access.public
@tag(["OAuth"])
@document_response(ScopeCatalogue)
async def scopes() -> Any:
    """Every scope an app can request, with category, description and sensitivity.

    The spec's prose says 22 scopes but its table lists 23; volthub serves the table's 23
    (DESIGN §5). Legacy aliases are accepted on authorize and in stored tokens.
    """
    return jsonify(catalogue_document())


def issuer() -> str:
    public_url = runtime().settings.server.public_url
    return (public_url or request.host_url).rstrip("/")


@blueprint.get("/.well-known/oauth-authorization-server")
@access.public
@tag(["OAuth"])
async def metadata() -> Any:
    """Authorization server metadata (RFC 8414). The issuer is `[server] public_url`, or
    the request's own origin when that is empty."""
    base = issuer()
    methods = ["S256", "plain"] if runtime().settings.oauth.allow_plain_pkce else ["S256"]
    auth_methods = ["client_secret_basic", "client_secret_post", "none"]
    return jsonify(
        {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/api/developer/oauth/token",
            "revocation_endpoint": f"{base}/api/developer/oauth/revoke",
            "scopes_supported": list(SCOPE_NAMES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": list(GRANT_TYPES),
            "token_endpoint_auth_methods_supported": auth_methods,
            "revocation_endpoint_auth_methods_supported": auth_methods,
            "code_challenge_methods_supported": methods,
            "service_documentation": f"{base}/api/openapi.json",
        }
    )


# --- a user's connected apps ---------------------------------------------------------------------------


class ConnectionOut(Model):
    clientId: str
    name: str
    description: str
    logoUrl: str | None
    reviewed: bool
    scopes: list[str] = Field(description="real scopes the app holds now, in catalogue order")
    connectedAt: str
    updatedAt: str


class ConnectionList(Model):
    items: list[ConnectionOut]


@blueprint.get("/api/users/me/connections")
@access.first_party
@tag(["OAuth"])
@document_response(ConnectionList)
async def connections() -> Any:
    """Apps the signed-in user has authorised (with at least one active grant)."""
    user_id = access.principal().user_id

    def read(tx: Any) -> list[ConnectionOut]:
        grouped: dict[str, list[oauth_repo.Grant]] = {}
        for grant in oauth_repo.active_grants(tx, user_id):
            grouped.setdefault(grant.client_id, []).append(grant)
        items = []
        for client_id, grants in grouped.items():
            app = apps_repo.get_app(tx, client_id)
            if app is None:
                continue
            held = set().union(*(g.held for g in grants))
            items.append(
                ConnectionOut(
                    clientId=app.client_id,
                    name=app.name,
                    description=app.description,
                    logoUrl=app.logo_url,
                    reviewed=app.reviewed,
                    scopes=format_scope(held).split(),
                    connectedAt=iso8601(min(g.created_at for g in grants)),
                    updatedAt=iso8601(max(g.updated_at for g in grants)),
                )
            )
        return items

    items = await runtime().db.read(read)
    return jsonify(ConnectionList(items=items).model_dump())


@blueprint.delete("/api/users/me/connections/<client_id>")
@access.first_party
@tag(["OAuth"])
async def disconnect(client_id: str) -> Any:
    """Revoke every grant the signed-in user gave this app; its tokens stop working at once.
    Publishes `user.authorization.revoke`. 404 when the user has no active grant for it."""
    found = plausible_client_id(client_id) and await oauth_service().revoke_connection(
        access.principal().user_id, client_id
    )
    if not found:
        raise not_found("connection", clientId=client_id)
    return Response("", status=204)
