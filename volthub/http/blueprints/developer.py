"""The developer dashboard at `/developer`: server-rendered pages over the existing services.

Sign-in with the first-party account sets a session cookie (`volthub_dev`, path
`/developer`, HttpOnly, SameSite=Strict). Every form carries a CSRF token bound to the
signed-in user (or to sign-in) and to a per-browser seed cookie; a POST without a valid one
is refused with 403 and changes nothing. Apps, webhooks, the delivery log, redelivery and
grants go through the same services as the JSON API (apps, webhook admin, sandbox), so the
same ownership rules hold: an app or webhook of someone else is not found. The live
inspector reads `/developer/events`, the signed-in user's channel as SSE.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from quart import Blueprint, Response, jsonify, request
from quart_schema import hide

from volthub.http import access, developer_page
from volthub.http.blueprints.developer_apps import AppCreateBody
from volthub.http.blueprints.devpages import html_response
from volthub.http.blueprints.events import stream_response
from volthub.http.blueprints.oauth.common import single_values
from volthub.http.blueprints.sandbox import TestEventBody, publish_test
from volthub.http.blueprints.webhooks import _check_events
from volthub.http.developer_page import AppView, DeliveryView, GrantView, WebhookView
from volthub.http.errors import DOMAIN_ERRORS, ApiError
from volthub.http.login_guard import LoginThrottled, guarded_login
from volthub.http.page_session import csrf_ok, csrf_token, session_claims, session_user, set_cookie, sign_in
from volthub.http.runtime import runtime
from volthub.hub.clock import iso8601
from volthub.protocol import catalogue, trigger
from volthub.protocol.webhooks import InvalidTarget
from volthub.services.apps import AppFields
from volthub.services.users import User
from volthub.services.webhooks import WebhookChange

blueprint = Blueprint("developer", __name__, url_prefix="/developer")

SESSION_COOKIE = "volthub_dev"
CSRF_COOKIE = "volthub_dev_csrf"
COOKIE_PATH = "/developer"
FORM = "application/x-www-form-urlencoded"
LOGIN_PURPOSE = "developer-login"
DELIVERIES_SHOWN = 50


def _purpose(user: User) -> str:
    return f"developer|{user.id}"


def _seed() -> str:
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)


def _page(body: str, seed: str, status: int = 200) -> Response:
    response = html_response(body, status)
    if request.cookies.get(CSRF_COOKIE) != seed:
        set_cookie(response, CSRF_COOKIE, seed, None, COOKIE_PATH, samesite="Strict")
    return response


def _redirect(location: str) -> Response:
    response = Response("", status=303, headers={"Location": location})
    response.headers["Cache-Control"] = "no-store"
    return response


def _problem(title: str, message: str, status: int) -> Response:
    return html_response(developer_page.render_problem(title, message), status)


def _wants_json() -> bool:
    return request.accept_mimetypes.best_match(["text/html", "application/json"]) == "application/json"


def _refused() -> Response:
    return _problem(
        "This form has expired", "The form was not sent by this page or it is too old. Reload and try again.", 403
    )


async def _user() -> User | None:
    return await session_user(request.cookies.get(SESSION_COOKIE))


def _as_message(exc: Exception) -> tuple[str, int] | None:
    """The JSON API's error for a domain exception: its message and status."""
    if isinstance(exc, ApiError):
        return exc.message, exc.status
    if isinstance(exc, InvalidTarget):
        return f"{exc.code}: {exc.message}", 400
    translate = DOMAIN_ERRORS.get(type(exc))
    if translate is None:
        return None
    error = translate(exc)
    return error.message, error.status


Handler = Callable[[User, dict[str, str], str], Awaitable[Response]]
FormHandler = Callable[..., Awaitable[Response]]


def form_post(path: str) -> Callable[[FormHandler], FormHandler]:
    """A dashboard form's route: `handler(user, values, seed, **route arguments)` runs only
    for a signed-in user with a valid CSRF token (see `_post`)."""

    def register(handler: FormHandler) -> FormHandler:
        async def view(**route: str) -> Response:
            return await _post(functools.partial(handler, **route))

        view.__name__ = handler.__name__
        view.__doc__ = handler.__doc__
        blueprint.post(path)(hide(access.public(access.accepts(FORM)(view))))
        return handler

    return register


async def _post(handler: Handler) -> Response:
    """Every dashboard form: signed in, a valid CSRF token, then the handler; a refusal of
    the service becomes a page with its message (nothing was changed)."""
    user = await _user()
    if user is None:
        return _redirect(developer_page.BASE)
    values = single_values(await request.form)
    seed = request.cookies.get(CSRF_COOKIE)
    if not csrf_ok(seed, _purpose(user), values.get("csrf_token")):
        return _refused()
    try:
        return await handler(user, values, seed or "")
    except Exception as exc:
        known = _as_message(exc)
        if known is None:
            raise
        message, status = known
        if _wants_json():
            answer = jsonify({"error": "refused", "message": message})
            answer.status_code = status
            return answer
        return _problem("That did not work", message, status)


# --- sign-in -----------------------------------------------------------------------------------


@blueprint.get("")
@hide
@access.public
async def home() -> Response:
    seed = _seed()
    user = await _user()
    if user is None:
        return _page(developer_page.render_login(csrf_token(seed, LOGIN_PURPOSE)), seed)
    sent = request.args.get("sent")
    notice = f"Sent test event {sent}." if sent and len(sent) <= 64 else None
    apps = await runtime().services.apps.of_owner(user.id)
    body = developer_page.render_home(
        user.username,
        csrf_token(seed, _purpose(user)),
        [_app_view(a) for a in apps],
        trigger.names(),
        notice=notice,
    )
    return _page(body, seed)


@blueprint.post("/login")
@hide
@access.public
@access.accepts(FORM)
async def login() -> Response:
    values = single_values(await request.form)
    seed = request.cookies.get(CSRF_COOKIE)
    if not csrf_ok(seed, LOGIN_PURPOSE, values.get("csrf_token")):
        return _refused()
    username, password = values.get("username", ""), values.get("password", "")
    user = None
    if username and 0 < len(password) <= 128 and len(username) <= 25 and username.isascii():
        try:  # the login route's throttles apply here too
            user = await guarded_login(username, password)
        except LoginThrottled as refused:
            error = f"Too many sign-in attempts. Try again in {refused.throttled.retry_after} s."
            return _page(developer_page.render_login(csrf_token(seed or "", LOGIN_PURPOSE), error), seed or "", 429)
    if user is None:
        body = developer_page.render_login(csrf_token(seed or "", LOGIN_PURPOSE), "Wrong username or password.")
        return _page(body, seed or "", 400)
    session, expires_at = await sign_in(user.id)
    response = _redirect(developer_page.BASE)
    max_age = max(0, int(expires_at - runtime().clock.now()))
    set_cookie(response, SESSION_COOKIE, session, max_age, COOKIE_PATH, samesite="Strict")
    return response


@form_post("/logout")
async def logout(user: User, values: dict[str, str], seed: str) -> Response:
    claims = await session_claims(request.cookies.get(SESSION_COOKIE))
    if claims is not None and claims.session_id is not None:
        await runtime().services.sessions.revoke(user.id, claims.session_id)
    response = _redirect(developer_page.BASE)
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
    return response


# --- apps --------------------------------------------------------------------------------------


def _app_view(app: Any) -> AppView:
    return AppView(app.client_id, app.name, app.logo_url, list(app.redirect_uris), app.is_public)


def _app_fields(values: dict[str, str]) -> AppCreateBody:
    """The form's fields checked by the JSON API's own model (same rules, same messages)."""
    try:
        return AppCreateBody.model_validate(
            {
                "name": values.get("name", "").strip(),
                "redirectUris": developer_page.listify(values.get("redirect_uris")),
                "logoUrl": values.get("logo_url", "").strip() or None,
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ApiError(400, "validation_error", f"{field}: {first['msg']}", {"field": field}) from None


async def _app_page(user: User, client_id: str, seed: str, **extra: Any) -> Response:
    rt = runtime()
    app = await rt.services.apps.owned(user.id, client_id)
    grants = await rt.services.apps.user_grants(user.id, client_id)
    hooks = await rt.services.webhook_admin.of_app(user.id, client_id)
    body = developer_page.render_app(
        user.username,
        csrf_token(seed, _purpose(user)),
        _app_view(app),
        [GrantView(g.username, g.scopes, iso8601(g.created_at)) for g in grants],
        [WebhookView(w.id, w.url, list(w.events), w.enabled, w.disabled_reason) for w in hooks],
        sorted(catalogue.WEBHOOK_EVENTS),
        **extra,
    )
    return _page(body, seed)


@form_post("/apps")
async def create_app(user: User, values: dict[str, str], seed: str) -> Response:
    checked = _app_fields(values)
    fields = AppFields(
        name=checked.name,
        description="",
        logo_url=checked.logoUrl,
        redirect_uris=list(checked.redirectUris),
        bot_app=False,
        public=False,
    )
    app, secret = await runtime().services.apps.create(user.id, fields)
    shown = ("client secret", secret) if secret else None
    return await _app_page(user, app.client_id, seed, secret=shown)


@blueprint.get("/apps/<client_id>")
@hide
@access.public
async def app_page(client_id: str) -> Response:
    user = await _user()
    if user is None:
        return _redirect(developer_page.BASE)
    try:
        return await _app_page(user, client_id, _seed())
    except Exception as exc:
        known = _as_message(exc)
        if known is None:
            raise
        return _problem("Not found", known[0], known[1])


@form_post("/apps/<client_id>")
async def update_app(user: User, values: dict[str, str], seed: str, client_id: str) -> Response:
    checked = _app_fields(values)
    changes = {"name": checked.name, "logo_url": checked.logoUrl, "redirect_uris": list(checked.redirectUris)}
    await runtime().services.apps.update(user.id, client_id, changes)
    return _redirect(f"{developer_page.BASE}/apps/{client_id}")


@form_post("/apps/<client_id>/rotate-secret")
async def rotate_app_secret(user: User, values: dict[str, str], seed: str, client_id: str) -> Response:
    _, secret = await runtime().services.apps.rotate_secret(user.id, client_id)
    return await _app_page(user, client_id, seed, secret=("client secret", secret))


# --- webhooks ----------------------------------------------------------------------------------


@form_post("/apps/<client_id>/webhooks")
async def create_webhook(user: User, values: dict[str, str], seed: str, client_id: str) -> Response:
    events = _check_events([e for e in (await request.form).getlist("events") if e])
    if not events:
        raise ApiError(400, "validation_error", "events: choose at least one", {"field": "events"})
    admin = runtime().services.webhook_admin
    await admin.check_app(user.id, client_id)
    url = await admin.check_target(values.get("url", "").strip())
    webhook = await admin.create(user.id, client_id, url, events)
    return await _app_page(user, client_id, seed, secret=("webhook signing secret", webhook.secret))


@form_post("/apps/<client_id>/webhooks/<webhook_id>/enabled")
async def toggle_webhook(user: User, values: dict[str, str], seed: str, client_id: str, webhook_id: str) -> Response:
    enabled = values.get("enabled") == "true"
    await runtime().services.webhook_admin.change(user.id, client_id, webhook_id, WebhookChange(enabled=enabled))
    return _redirect(f"{developer_page.BASE}/apps/{client_id}")


@form_post("/apps/<client_id>/webhooks/<webhook_id>/rotate-secret")
async def rotate_webhook_secret(
    user: User, values: dict[str, str], seed: str, client_id: str, webhook_id: str
) -> Response:
    webhook = await runtime().services.webhook_admin.rotate_secret(user.id, client_id, webhook_id)
    return await _app_page(user, client_id, seed, secret=("webhook signing secret", webhook.secret))


@blueprint.get("/apps/<client_id>/webhooks/<webhook_id>")
@hide
@access.public
async def webhook_page(client_id: str, webhook_id: str) -> Response:
    user = await _user()
    if user is None:
        return _redirect(developer_page.BASE)
    seed = _seed()
    services = runtime().services
    admin, apps = services.webhook_admin, services.apps
    try:
        app = await apps.owned(user.id, client_id)
        webhook = await admin.check_webhook(user.id, client_id, webhook_id)
        log = await admin.deliveries(user.id, client_id, webhook_id, DELIVERIES_SHOWN, None)
    except Exception as exc:
        known = _as_message(exc)
        if known is None:
            raise
        return _problem("Not found", known[0], known[1])
    views = []
    for d in log.items:
        last = d.attempts[-1] if d.attempts else None
        views.append(
            DeliveryView(
                d.id,
                d.event_id,
                d.event_name,
                d.state,
                d.attempt_count,
                None if d.next_attempt_at is None or d.completed_at is not None else iso8601(d.next_attempt_at),
                None if last is None else last.status_code,
                None if last is None else last.latency_ms,
                None if last is None else last.error,
                d.redelivery_of,
            )
        )
    body = developer_page.render_webhook(
        user.username,
        csrf_token(seed, _purpose(user)),
        _app_view(app),
        WebhookView(webhook.id, webhook.url, list(webhook.events), webhook.enabled, webhook.disabled_reason),
        views,
    )
    return _page(body, seed)


@form_post("/apps/<client_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
async def redeliver(
    user: User, values: dict[str, str], seed: str, client_id: str, webhook_id: str, delivery_id: str
) -> Response:
    await runtime().services.webhook_admin.redeliver(user.id, client_id, webhook_id, delivery_id)
    return _redirect(f"{developer_page.BASE}/apps/{client_id}/webhooks/{webhook_id}")


# --- test events and the inspector -----------------------------------------------------------


@form_post("/test-event")
async def test_event(user: User, values: dict[str, str], seed: str) -> Response:
    try:
        fields = trigger.parse_assignments(developer_page.listify(values.get("fields")))
    except trigger.InvalidField as exc:
        raise ApiError(400, "validation_error", f"fields: {exc}", {"field": "fields"}) from None
    body = TestEventBody(
        eventType=values.get("event", "")[:64],
        channelId=user.id,
        fields=fields or None,
        eventsApi=values.get("sockets") == "1",
        webhooks=values.get("webhooks") == "1",
    )
    event, _ = await publish_test(body, user, None, logged=True)
    if _wants_json():  # the page's script: the inspector keeps its stream
        return jsonify({"eventId": event.id, "event": event.name})
    return _redirect(f"{developer_page.BASE}?sent={event.id}")


@blueprint.get("/events")
@hide
@access.public
async def events() -> Response:
    """The signed-in user's channel as SSE (unnamed messages: the inspector lists them all)."""
    user = await _user()
    if user is None:  # signed out: to the sign-in page, as every dashboard page does
        return _redirect(developer_page.BASE)
    claims = await session_claims(request.cookies.get(SESSION_COOKIE))
    return await stream_response(user, None, "unnamed", None, claims.session_id if claims else None)
