"""The consent page for people: `GET /oauth/authorize` and its form posts.

The same checks as the JSON authorize API (`blueprints.oauth.authorize.check_authorize`), rendered
with `volthub.http.consent_page` and served with its SECURITY_HEADERS.

- Sign-in: the first-party login, on the page itself. On success the browser gets a session
  cookie holding a first-party session token (HttpOnly, SameSite=Lax, Secure over https,
  Path=/oauth so no other route ever sees it; the API reads only Authorization headers).
- CSRF: a random seed in its own cookie; each form carries HMAC(server key, purpose, seed),
  and the consent form's purpose names the signed-in user. A post without a matching token
  gets a 400 page, never a code.
- Errors that must not redirect (missing or unknown client, no or mismatching redirect URI)
  are a 400 page; the others, and the person's decision, are a 303 to the app's redirect URI
  with `code` and `state`, or `error` (`access_denied` on Deny) and `state`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from urllib.parse import urlencode

from quart import Blueprint, Response, request
from quart_schema import tag

from volthub.http import access
from volthub.http.blueprints.oauth.authorize import AuthorizeError, AuthorizeRequest, check_authorize, issue_code
from volthub.http.blueprints.oauth.common import single_values
from volthub.http.consent_page import (
    FORM_ACTION,
    OAUTH_PARAMS,
    SECURITY_HEADERS,
    render_consent_page,
    render_error_page,
)
from volthub.http.login_guard import LoginThrottled, guarded_login
from volthub.http.openapi import responds
from volthub.http.page_session import csrf_ok, csrf_token, session_user, set_cookie
from volthub.http.runtime import runtime
from volthub.services.oauth import OAuthError
from volthub.services.users import User

blueprint = Blueprint("consent", __name__)

SESSION_COOKIE = "volthub_oauth_session"
CSRF_COOKIE = "volthub_oauth_csrf"
COOKIE_PATH = "/oauth"
FORM = "application/x-www-form-urlencoded"
_USERNAME = re.compile(r"[A-Za-z0-9_]{1,25}")


@blueprint.get(FORM_ACTION)
@access.public
@tag(["OAuth"])
@responds(200, "The consent page", "text/html")
@responds(400, "A page saying what is wrong with the request", "text/html")
@responds(303, "Back to the app's redirect URI with an error (RFC 6749 §4.1.2.1)")
async def consent_page() -> Response:
    """The consent screen (HTML): the app's logo, name and reviewed badge, the requested
    scopes grouped by category with sensitive ones marked, Approve and Deny. Asks the person
    to sign in first when they have no session. Query parameters as for the authorize API."""
    try:
        params = single_values(request.args)
        checked = await check_authorize(params)
    except (OAuthError, AuthorizeError) as exc:
        return _refusal(exc)
    seed = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    return _page(checked, params, await _signed_in_user(), seed)


@blueprint.post(FORM_ACTION)
@responds(200, "The consent or sign-in page again, with an error", "text/html")
@responds(400, "A page saying what is wrong with the form", "text/html")
@responds(303, "To the app's redirect URI with a code or an error, or back to this page after sign-in")
@access.public
@access.accepts(FORM)
@tag(["OAuth"])
async def consent_submit() -> Response:
    """The consent screen's forms: `action=login` (username, password) signs in and shows
    the screen again; `action=consent` with `decision=approve|deny` redirects (303) to the
    app. Both need the page's `csrf_token`."""
    try:
        values = single_values(await request.form)
        params = {key: values[key] for key in OAUTH_PARAMS if key in values}
        checked = await check_authorize(params)
    except (OAuthError, AuthorizeError) as exc:
        return _refusal(exc)
    seed = request.cookies.get(CSRF_COOKIE)
    action = values.get("action")
    if action == "login":
        if not _csrf_ok(seed, _login_purpose(checked), values.get("csrf_token")):
            return _form_expired()
        return await _login(checked, params, values, seed or "")
    if action == "consent":
        return await _decide(checked, params, values, seed)
    return _error_page("Invalid form", "This form is not one this page sent.")


async def _decide(
    checked: AuthorizeRequest, params: dict[str, str], values: Mapping[str, str], seed: str | None
) -> Response:
    user = await _signed_in_user()
    if user is None:
        error = "Your sign-in has ended. Sign in again to continue."
        return _page(checked, params, None, seed or secrets.token_urlsafe(24), error=error)
    if seed is None:  # the CSRF cookie is gone (cleared, or blocked): ask again with a new one
        error = "This page had expired. Choose again."
        return _page(checked, params, user, secrets.token_urlsafe(24), error=error)
    if not _csrf_ok(seed, _consent_purpose(user, checked), values.get("csrf_token")):
        return _form_expired()
    decision = values.get("decision")
    if decision == "approve":
        code = await issue_code(user.id, checked)
        return _redirect(checked.redirect({"code": code}))
    if decision == "deny":
        return _redirect(
            checked.redirect({"error": "access_denied", "error_description": "the user denied the request"})
        )
    return _error_page("Invalid form", "Choose Approve or Deny.")


async def _login(checked: AuthorizeRequest, params: dict[str, str], values: Mapping[str, str], seed: str) -> Response:
    username, password = values.get("username", ""), values.get("password", "")
    user = None
    # Only what registration allows reaches the database (PostgreSQL refuses NUL in text).
    if _USERNAME.fullmatch(username) and 0 < len(password) <= 128:
        try:  # the login route's throttles apply here too
            user = await guarded_login(username, password)
        except LoginThrottled as refused:
            wait = refused.throttled.retry_after
            return _page(checked, params, None, seed, error=f"Too many sign-in attempts. Try again in {wait} s.")
    if user is None:
        return _page(checked, params, None, seed, error="Wrong username or password.")
    tokens = runtime().tokens
    assert tokens is not None
    session_token, expires_at = tokens.issue_session(user.id)
    # Post/redirect/get: a reload of the consent screen never re-sends the password.
    response = _redirect(f"{FORM_ACTION}?{urlencode(params)}")
    max_age = max(0, int(expires_at - runtime().clock.now()))
    _set_cookie(response, SESSION_COOKIE, session_token, max_age)
    return response


async def _signed_in_user() -> User | None:
    return await session_user(request.cookies.get(SESSION_COOKIE))


# --- CSRF ------------------------------------------------------------------------------------------


def _consent_purpose(user: User, checked: AuthorizeRequest) -> str:
    return f"consent|{user.id}|{_request_digest(checked)}"


def _login_purpose(checked: AuthorizeRequest) -> str:
    return f"login|{_request_digest(checked)}"


def _request_digest(checked: AuthorizeRequest) -> str:
    """Binds a page's CSRF token to the authorization request it was issued for: a token
    taken from one consent page cannot approve another app, scope, redirect or challenge."""
    parts = (
        checked.app.client_id,
        checked.redirect_uri,
        checked.scope,
        checked.state or "",
        checked.code_challenge or "",
        checked.code_challenge_method or "",
    )
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


_csrf_token = csrf_token
_csrf_ok = csrf_ok


# --- responses -------------------------------------------------------------------------------------


def _page(
    checked: AuthorizeRequest, params: Mapping[str, str], user: User | None, seed: str, error: str | None = None
) -> Response:
    app = checked.app
    purpose = _login_purpose(checked) if user is None else _consent_purpose(user, checked)
    html = render_consent_page(
        app={
            "clientId": app.client_id,
            "name": app.name,
            "description": app.description,
            "logoUrl": app.logo_url,
            "reviewed": app.reviewed,
        },
        scope_groups=checked.consent_groups(),
        params=params,
        user=None if user is None else {"username": user.username, "displayName": user.display_name},
        csrf_token=_csrf_token(seed, purpose),
        error=error,
    )
    response = _html(html, 200)
    if request.cookies.get(CSRF_COOKIE) != seed:
        _set_cookie(response, CSRF_COOKIE, seed, None)
    return response


def _refusal(exc: OAuthError | AuthorizeError) -> Response:
    redirect_url = exc.redirect_url if isinstance(exc, AuthorizeError) else None
    if redirect_url is not None:
        return _redirect(redirect_url)
    return _error_page("This app's request is not valid", exc.message)


def _form_expired() -> Response:
    return _error_page(
        "This form has expired",
        "The page was not sent by this site or it is too old. Go back to the app and start again.",
    )


def _error_page(title: str, message: str) -> Response:
    return _html(render_error_page(title, message), 400)


def _html(body: str, status: int) -> Response:
    response = Response(body, status=status, content_type="text/html; charset=utf-8")
    response.headers.update(SECURITY_HEADERS)
    return response


def _redirect(location: str) -> Response:
    response = Response("", status=303, headers={"Location": location})
    response.headers.update(SECURITY_HEADERS)
    return response


def _set_cookie(response: Response, name: str, value: str, max_age: int | None) -> None:
    set_cookie(response, name, value, max_age, COOKIE_PATH)
