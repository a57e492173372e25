"""Server-rendered HTML for the people-facing consent flow at ``/oauth/authorize`` (sans-IO).

Everything an app author or a request controls is escaped with ``html.escape(quote=True)``
(app name, description, logo URL, OAuth parameters, usernames, error text). The page has
no scripts and no external assets except the app's own logo, which is shown only when it
is an ``https:`` URL or a ``data:image/<raster>`` URL; anything else gets a letter avatar.

Serve the pages with ``SECURITY_HEADERS``: its Content-Security-Policy pins the inline
stylesheet by hash, forbids framing (the Approve button must not be clickjackable), and
keeps the logo request from leaking the page URL (which carries ``state``) as a Referer.

Stable hooks for browser tests: ``#approve``, ``#deny``, ``#login-username``,
``#login-password``, ``#login-submit``, ``.scope[data-scope=NAME]``, ``.scope.sensitive``,
``#app-name``, ``#reviewed-badge`` / ``#unreviewed-badge``, ``#error``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict
from urllib.parse import urlsplit

__all__ = [
    "BOT_SELECT_ACTION",
    "CONTENT_SECURITY_POLICY",
    "FORM_ACTION",
    "OAUTH_PARAMS",
    "SECURITY_HEADERS",
    "ConsentApp",
    "ConsentUser",
    "render_bot_select_page",
    "render_consent_page",
    "render_error_page",
]

FORM_ACTION = "/oauth/authorize"
# Only these request parameters are carried through the forms, in this order; anything
# else in ``params`` is ignored so a request cannot smuggle extra fields into the POST.
OAUTH_PARAMS: tuple[str, ...] = (
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
)


class ConsentApp(TypedDict, total=False):
    name: str
    description: str | None
    logoUrl: str | None
    reviewed: bool
    clientId: str


class ConsentUser(TypedDict, total=False):
    username: str
    displayName: str | None


_CSS = """\
:root{color-scheme:light dark;--bg:#f3f4f7;--card:#fff;--fg:#1b1d22;--muted:#5d6470;\
--border:#dcdfe5;--accent:#5b3df5;--accent-fg:#fff;--ok-bg:#e6f5ec;--ok-fg:#17603a;\
--warn-bg:#fff3e0;--warn-fg:#7a4300;--bad-bg:#fdeceb;--bad-fg:#a11d12}
@media (prefers-color-scheme:dark){:root{--bg:#0e1014;--card:#181b21;--fg:#e8eaee;\
--muted:#a3a9b4;--border:#2d323b;--accent:#9584ff;--accent-fg:#0e1014;--ok-bg:#10301e;\
--ok-fg:#90e0b0;--warn-bg:#3a2a10;--warn-fg:#ffcd85;--bad-bg:#3b1715;--bad-fg:#ffb3aa}}
*{box-sizing:border-box}
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;\
padding:24px 14px;background:var(--bg);color:var(--fg);\
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",sans-serif}
main{width:100%;max-width:440px;background:var(--card);border:1px solid var(--border);\
border-radius:16px;padding:26px 22px;box-shadow:0 10px 30px rgba(0,0,0,.08)}
.brand{margin:0 0 18px;font-weight:700;font-size:.85rem;letter-spacing:.04em;color:var(--muted)}
.app{display:flex;gap:14px;align-items:center}
.logo,.avatar{width:56px;height:56px;border-radius:12px;flex:none}
.logo{object-fit:cover;background:var(--border)}
.avatar{display:flex;align-items:center;justify-content:center;font-size:1.6rem;font-weight:700;color:#fff}
.c0{background:#5b3df5}.c1{background:#c2410c}.c2{background:#0f766e}.c3{background:#b91c1c}
.c4{background:#1d4ed8}.c5{background:#7e22ce}.c6{background:#15803d}.c7{background:#a16207}
h1{margin:0;font-size:1.25rem;line-height:1.3;overflow-wrap:anywhere}
h2{margin:22px 0 8px;font-size:1rem}
h3{margin:14px 0 6px;font-size:.78rem;text-transform:uppercase;letter-spacing:.06em;color:var(--muted)}
p{margin:12px 0 0}
.badge{display:inline-block;margin:6px 0 0;padding:1px 9px;border-radius:999px;font-size:.8rem;font-weight:600}
.reviewed{background:var(--ok-bg);color:var(--ok-fg)}
.warn{background:var(--warn-bg);color:var(--warn-fg)}
.notice{margin:14px 0 0;padding:10px 12px;border-radius:10px;font-size:.9rem}
.description{color:var(--muted);white-space:pre-line;overflow-wrap:anywhere}
.signed-in{font-size:.9rem;color:var(--muted);overflow-wrap:anywhere}
ul{list-style:none;margin:0;padding:0}
li{margin:0 0 6px;padding:8px 11px;border:1px solid var(--border);border-radius:10px}
.scope code{display:block;font-size:.78rem;color:var(--muted)}
.scope.sensitive{border-color:var(--bad-fg);background:var(--bad-bg)}
.sensitive-label{display:inline-block;margin-left:6px;padding:0 7px;border-radius:999px;\
font-size:.72rem;font-weight:700;text-transform:uppercase;letter-spacing:.04em;\
background:var(--bad-fg);color:var(--card)}
label{display:block;margin:14px 0 4px;font-size:.9rem;font-weight:600}
input[type=text],input[type=password]{width:100%;padding:10px 12px;font:inherit;color:var(--fg);\
background:var(--bg);border:1px solid var(--border);border-radius:10px}
.actions{display:flex;gap:10px;margin-top:22px}
button{flex:1;padding:11px 14px;font:inherit;font-weight:600;color:var(--fg);cursor:pointer;\
background:transparent;border:1px solid var(--border);border-radius:10px}
button.primary{background:var(--accent);border-color:var(--accent);color:var(--accent-fg)}
button:focus-visible,input:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.error{margin:0 0 16px;padding:10px 12px;border-radius:10px;background:var(--bad-bg);\
color:var(--bad-fg);overflow-wrap:anywhere}
.fine{font-size:.8rem;color:var(--muted);overflow-wrap:anywhere}
"""

_CSS_HASH = base64.b64encode(hashlib.sha256(_CSS.encode("utf-8")).digest()).decode("ascii")

# No form-action: browsers apply it to the redirect that follows the POST, and that
# redirect goes to the app's own (third-party) redirect URI.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src https: data:; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",  # the page carries a CSRF token and who is signed in
}

# Raster types only: they cannot carry script, and base64 keeps the attribute plain.
_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp|avif);base64,[A-Za-z0-9+/]+={0,2}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _e(value: object) -> str:
    text = html.escape("" if value is None else str(value), quote=True)
    # Browsers turn a raw CR into LF before parsing, which would alter a hidden ``state``
    # on its way back; a character reference survives. Lone surrogates cannot be encoded
    # as UTF-8 at all, so they become U+FFFD rather than failing the response.
    return _SURROGATE.sub("\ufffd", text.replace("\r", "&#13;"))


def _safe_logo_url(url: object) -> str | None:
    if not isinstance(url, str) or not url or len(url) > 1_000_000:
        return None
    if _DATA_IMAGE.fullmatch(url):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    ok = parts.scheme == "https" and bool(parts.hostname) and not any(c.isspace() for c in url)
    return url if ok else None


def _logo(app: Mapping[str, Any]) -> str:
    name = str(app.get("name") or "")
    url = _safe_logo_url(app.get("logoUrl"))
    if url is not None:
        return (
            f'<img class="logo" id="app-logo" src="{_e(url)}" alt="{_e(name)} logo" '
            'width="56" height="56" referrerpolicy="no-referrer">'
        )
    letter = next((c for c in name if c.isalnum()), "?").upper()
    colour = zlib.crc32(name.encode("utf-8", "surrogatepass")) % 8
    return f'<div class="avatar c{colour}" id="app-avatar" aria-hidden="true">{_e(letter)}</div>'


def _badge(app: Mapping[str, Any]) -> str:
    if app.get("reviewed") is True:
        return '<p class="badge reviewed" id="reviewed-badge">Reviewed by volthub</p>'
    return (
        '<p class="notice warn" id="unreviewed-badge" role="note"><strong>Unreviewed app.</strong> '
        "volthub has not reviewed this app. Continue only if you trust its developer.</p>"
    )


def _app_header(app: Mapping[str, Any], heading: str) -> str:
    # heading is trusted markup with the escaped app name already inside it
    return f'<header class="app">{_logo(app)}<div><h1>{heading}</h1></div></header>{_badge(app)}'


def _app_name(app: Mapping[str, Any]) -> str:
    return f'<span id="app-name">{_e(app.get("name") or "Unnamed app")}</span>'


def _hidden_fields(action: str, params: Mapping[str, Any], csrf_token: str) -> str:
    fields = [("action", action), ("csrf_token", csrf_token)]
    fields += [(k, params[k]) for k in OAUTH_PARAMS if params.get(k) is not None]
    return "".join(f'<input type="hidden" name="{_e(k)}" value="{_e(v)}">' for k, v in fields)


def _error_block(error: str | None) -> str:
    return f'<div class="error" id="error" role="alert">{_e(error)}</div>' if error else ""


def _scope_item(scope: Mapping[str, Any]) -> str:
    sensitive = scope.get("sensitive") is True
    label = ' <span class="sensitive-label">Sensitive</span>' if sensitive else ""
    cls = "scope sensitive" if sensitive else "scope"
    return (
        f'<li class="{cls}" data-scope="{_e(scope.get("name"))}">'
        f'<span class="scope-description">{_e(scope.get("description"))}</span>{label}'
        f"<code>{_e(scope.get('name'))}</code></li>"
    )


def _scope_section(scope_groups: Sequence[Mapping[str, Any]]) -> str:
    # Every token can read its owner's own profile (GET /api/users/me needs no scope), so
    # that is always listed, even when no scope is requested.
    parts = [
        '<section aria-labelledby="permissions-heading">',
        '<h2 id="permissions-heading">This app will be able to</h2>',
        '<ul><li class="baseline">See your username and public profile</li></ul>',
    ]
    for group in scope_groups:
        items = "".join(_scope_item(s) for s in group.get("scopes", ()))
        parts.append(f'<h3>{_e(group.get("category"))}</h3><ul class="scopes">{items}</ul>')
    parts.append("</section>")
    return "".join(parts)


def _sensitive_notice(scope_groups: Sequence[Mapping[str, Any]]) -> str:
    count = sum(1 for g in scope_groups for s in g.get("scopes", ()) if s.get("sensitive") is True)
    if not count:
        return ""
    noun = "permission" if count == 1 else "permissions"
    return (
        f'<p class="notice warn" id="sensitive-notice">This request includes {count} sensitive '
        f"{noun}, marked Sensitive. Grant sensitive permissions only to apps you trust.</p>"
    )


def _signed_in(user: Mapping[str, Any]) -> str:
    username = _e(user.get("username"))
    display = user.get("displayName")
    who = f"<strong>{_e(display)}</strong> (@{username})" if display else f"<strong>@{username}</strong>"
    return f'<p class="signed-in" id="signed-in">Signed in as {who}</p>'


def _redirect_note(params: Mapping[str, Any]) -> str:
    uri = params.get("redirect_uri")
    if not uri:
        return ""
    return f'<p class="fine" id="redirect-target">After you choose, you will be sent to <code>{_e(uri)}</code></p>'


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="robots" content="noindex, nofollow">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f'<body><main><p class="brand">volthub</p>{body}</main></body></html>\n'
    )


# The username and password fields and the button that end both sign-in forms (the OAuth
# consent flow's and the bot-select flow's).
_SIGN_IN_FIELDS = (
    '<label for="login-username">Username</label>'
    '<input type="text" id="login-username" name="username" autocomplete="username" '
    'autocapitalize="none" spellcheck="false" maxlength="25" required>'
    '<label for="login-password">Password</label>'
    '<input type="password" id="login-password" name="password" '
    'autocomplete="current-password" maxlength="128" required>'
    '<div class="actions"><button type="submit" id="login-submit" class="primary">Sign in'
    "</button></div></form>"
)


def _login_body(app: Mapping[str, Any], params: Mapping[str, Any], csrf_token: str) -> str:
    return (
        _app_header(app, f"Sign in to continue to {_app_name(app)}")
        + f'<form id="login-form" method="post" action="{FORM_ACTION}">'
        + _hidden_fields("login", params, csrf_token)
        + _SIGN_IN_FIELDS
    )


def _consent_body(
    app: Mapping[str, Any],
    scope_groups: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    user: Mapping[str, Any],
    csrf_token: str,
) -> str:
    description = app.get("description")
    desc = f'<p class="description" id="app-description">{_e(description)}</p>' if description else ""
    # Deny comes first in the DOM: should anything trigger implicit submission (which uses
    # the first submit button), it denies rather than grants.
    return (
        _app_header(app, f"{_app_name(app)} wants to access your volthub account")
        + desc
        + _signed_in(user)
        + _scope_section(scope_groups)
        + _sensitive_notice(scope_groups)
        + f'<form id="consent-form" method="post" action="{FORM_ACTION}">'
        + _hidden_fields("consent", params, csrf_token)
        + '<div class="actions">'
        '<button type="submit" id="deny" name="decision" value="deny">Deny</button>'
        '<button type="submit" id="approve" class="primary" name="decision" value="approve">'
        "Approve</button></div></form>" + _redirect_note(params)
    )


def render_consent_page(
    *,
    app: Mapping[str, Any],
    scope_groups: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    user: Mapping[str, Any] | None,
    csrf_token: str,
    error: str | None = None,
) -> str:
    """The consent page: a sign-in form when ``user`` is None, else the Approve/Deny form.

    ``scope_groups`` is the output of ``scopes.group_for_consent``; ``params`` holds the
    authorize request's OAuth parameters (only ``OAUTH_PARAMS`` are carried through).
    """
    name = app.get("name") or "Unnamed app"
    if user is None:
        title, body = f"Sign in – {name} – volthub", _login_body(app, params, csrf_token)
    else:
        title = f"Authorize {name} – volthub"
        body = _consent_body(app, scope_groups, params, user, csrf_token)
    return _page(title, _error_block(error) + body)


def render_error_page(title: str, message: str) -> str:
    """A page for authorize errors that must not redirect (unknown client, bad redirect URI)."""
    body = (
        f'<h1 id="error-title">{_e(title)}</h1>'
        f'<p class="error" id="error" role="alert">{_e(message)}</p>'
        '<p class="fine">For your safety you were not sent back to the app. '
        "You can close this window.</p>"
    )
    return _page(f"{title} – volthub", body)


# --- the bot-select page (a channel connects a bot through the bot-select flow) ----------

BOT_SELECT_ACTION = "/oauth/bot/select"


def _bot_fields(action: str, client_id: str, csrf_token: str) -> str:
    fields = [("action", action), ("csrf_token", csrf_token), ("client_id", client_id)]
    return "".join(f'<input type="hidden" name="{_e(k)}" value="{_e(v)}">' for k, v in fields)


def render_bot_select_page(
    *,
    bot: Mapping[str, Any],
    user: Mapping[str, Any] | None,
    csrf_token: str,
    current: str | None = None,
    error: str | None = None,
    done: str | None = None,
) -> str:
    """Choose a bot for your channel: sign in first, then Cancel or Connect; `done` shows
    the outcome instead of the form. ``bot``: clientId, name (the bot's), appName, logoUrl,
    reviewed."""
    app = {"name": bot.get("appName"), "logoUrl": bot.get("logoUrl"), "reviewed": bot.get("reviewed")}
    bot_name = f'<span id="bot-name">{_e(bot.get("name"))}</span>'
    client_id = str(bot.get("clientId") or "")
    if done is not None:
        body = _app_header(app, f"{bot_name}") + f'<p class="notice" id="done" role="status">{_e(done)}</p>'
        body += '<p class="fine">You can close this window.</p>'
        return _page(f"Bot – {bot.get('name')} – volthub", body)
    if user is None:
        body = (
            _app_header(app, f"Sign in to connect {bot_name} to your channel")
            + f'<form id="login-form" method="post" action="{BOT_SELECT_ACTION}">'
            + _bot_fields("login", client_id, csrf_token)
            + _SIGN_IN_FIELDS
        )
        return _page(f"Sign in – {bot.get('name')} – volthub", _error_block(error) + body)
    replacing = (
        f'<p class="fine" id="current-bot">It replaces <strong>{_e(current)}</strong> as your channel\'s bot.</p>'
        if current
        else ""
    )
    body = (
        _app_header(app, f"Connect {bot_name} to your channel?")
        + _signed_in(user)
        + '<p id="bot-explainer">Apps you authorised with <code>chat:write</code> will be able to post in your '
        "chat as this bot. It moderates only if you make it a moderator.</p>"
        + replacing
        + f'<form id="bot-form" method="post" action="{BOT_SELECT_ACTION}">'
        + _bot_fields("select", client_id, csrf_token)
        + '<div class="actions">'
        '<button type="submit" id="cancel" name="decision" value="cancel">Cancel</button>'
        '<button type="submit" id="connect" class="primary" name="decision" value="connect">'
        "Connect</button></div></form>"
    )
    return _page(f"Connect a bot – {bot.get('name')} – volthub", _error_block(error) + body)
