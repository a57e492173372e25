"""The bot-select page for people: `GET /oauth/bot/select?client_id=…`.

The consent-like way to choose which bot speaks in your channel: it shows the bot (its
app's logo and reviewed badge), asks you to sign in when needed, and Connect / Cancel.
It reuses the consent page's session cookie and CSRF scheme (blueprints.consent): the
session cookie lives under /oauth, so signing in on either page serves both. The JSON
equivalents are `GET|POST|DELETE /api/integrations/oauth/bot/select`.
"""

from __future__ import annotations

import secrets

from quart import Blueprint, Response, request
from quart_schema import tag

from volthub.http import access
from volthub.http.blueprints.bots import bot_out
from volthub.http.blueprints.consent import (
    _USERNAME,
    CSRF_COOKIE,
    FORM,
    SESSION_COOKIE,
    _csrf_ok,
    _csrf_token,
    _error_page,
    _html,
    _redirect,
    _set_cookie,
    _signed_in_user,
)
from volthub.http.blueprints.oauth.common import single_values
from volthub.http.consent_page import BOT_SELECT_ACTION, render_bot_select_page
from volthub.http.openapi import responds
from volthub.http.page_session import sign_in
from volthub.http.runtime import runtime
from volthub.services.bots import Bot, BotNotConfigured
from volthub.services.users import User

blueprint = Blueprint("bot_select", __name__)


def _purpose(user: User | None) -> str:
    return "login" if user is None else f"bot-select|{user.id}"


async def _bot(client_id: str | None) -> Bot | None:
    if not client_id or len(client_id) > 64:
        return None
    try:
        return await runtime().services.bots.bot(client_id)
    except BotNotConfigured:
        return None


async def _render(
    bot: Bot, user: User | None, seed: str, *, error: str | None = None, done: str | None = None
) -> Response:
    current = None
    if user is not None and done is None:
        chosen = await runtime().services.bots.current(user.id, None)
        current = chosen.bot.username if chosen is not None and chosen.bot.client_id != bot.client_id else None
    who = None if user is None else {"username": user.username, "displayName": user.display_name}
    page = render_bot_select_page(
        bot=bot_out(bot).model_dump(),  # the bot as the API shows it
        user=who,
        csrf_token=_csrf_token(seed, _purpose(user)),
        current=current,
        error=error,
        done=done,
    )
    response = _html(page, 200)
    if request.cookies.get(CSRF_COOKIE) != seed:
        _set_cookie(response, CSRF_COOKIE, seed, None)
    return response


@blueprint.get(BOT_SELECT_ACTION)
@access.public
@tag(["Bots"])
@responds(200, "The bot-select page", "text/html")
@responds(400, "A page saying the link names no bot", "text/html")
async def bot_select_page() -> Response:
    """The bot-select page (HTML) for the bot of `client_id`; 400 page for an unknown bot."""
    bot = await _bot(request.args.get("client_id"))
    if bot is None:
        return _error_page("Unknown bot", "This link does not name a bot that can be connected.")
    seed = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    return await _render(bot, await _signed_in_user(), seed)


@blueprint.post(BOT_SELECT_ACTION)
@access.public
@access.accepts(FORM)
@tag(["Bots"])
@responds(200, "The page again, with the outcome or an error", "text/html")
@responds(400, "A page saying what is wrong with the form", "text/html")
@responds(303, "Back to the page after signing in")
async def bot_select_submit() -> Response:
    """`action=login` signs in (303 back to the page); `action=select` with
    `decision=connect|cancel` decides. Both need the page's `csrf_token`."""
    values = single_values(await request.form)
    bot = await _bot(values.get("client_id"))
    if bot is None:
        return _error_page("Unknown bot", "This form does not name a bot that can be connected.")
    seed = request.cookies.get(CSRF_COOKIE)
    action = values.get("action")
    if action == "login":
        if not _csrf_ok(seed, "login", values.get("csrf_token")):
            return _error_page("This form has expired", "Open the bot's link again.")
        return await _login(bot, values.get("username", ""), values.get("password", ""), seed or "")
    if action != "select":
        return _error_page("Invalid form", "This form is not one this page sent.")
    user = await _signed_in_user()
    if user is None:
        return await _render(bot, None, seed or secrets.token_urlsafe(24), error="Sign in again to continue.")
    if not _csrf_ok(seed, _purpose(user), values.get("csrf_token")):
        return _error_page("This form has expired", "Open the bot's link again.")
    decision = values.get("decision")
    if decision == "connect":
        await runtime().services.bots.select(user.id, bot.client_id)
        return await _render(bot, user, seed or "", done=f"{bot.username} is now your channel's bot.")
    if decision == "cancel":
        return await _render(bot, user, seed or "", done="Nothing was changed.")
    return _error_page("Invalid form", "Choose Connect or Cancel.")


async def _login(bot: Bot, username: str, password: str, seed: str) -> Response:
    rt, user = runtime(), None
    if _USERNAME.fullmatch(username) and 0 < len(password) <= 128:
        user = await rt.services.accounts.login(username, password)
    if user is None:
        return await _render(bot, None, seed, error="Wrong username or password.")
    session_token, expires_at = await sign_in(user.id)
    response = _redirect(f"{BOT_SELECT_ACTION}?client_id={bot.client_id}")
    _set_cookie(response, SESSION_COOKIE, session_token, max(0, int(expires_at - rt.clock.now())))
    return response
