"""Server-rendered HTML of the developer dashboard at `/developer` (sans-IO).

Every value is escaped. No inline script or style: the pages load volthub's own
`/static/devtools.css` and `/static/developer.js` (the live event inspector), under the
strict CSP of volthub.http.blueprints.devpages. Every form carries `csrf_token`.

Stable hooks for browser tests: `#login-form`, `#create-app`, `.app[data-client-id]`,
`#app-secret`, `#update-app`, `#rotate-app-secret`, `#grants`, `#create-webhook`,
`.webhook[data-webhook-id]`, `#webhook-secret`, `#deliveries`, `.delivery[data-event-id]`,
`.redeliver`, `#test-event`, `#test-result`, `#inspector-log`, `#error`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from volthub.http.docs_page import esc, page

SCRIPT = "/static/developer.js"
BASE = "/developer"


@dataclass(frozen=True)
class AppView:
    client_id: str
    name: str
    logo_url: str | None
    redirect_uris: list[str]
    public: bool


@dataclass(frozen=True)
class WebhookView:
    id: str
    url: str
    events: list[str]
    enabled: bool
    disabled_reason: str | None


@dataclass(frozen=True)
class GrantView:
    username: str
    scopes: list[str]
    created_at: str


@dataclass(frozen=True)
class DeliveryView:
    id: str
    event_id: str
    event: str
    status: str
    attempts: int
    next_attempt_at: str | None
    response_code: int | None
    latency_ms: int | None
    error: str | None
    redelivery_of: str | None


def _csrf(token: str) -> str:
    return f'<input type=hidden name=csrf_token value="{esc(token)}">'


def _form(action: str, token: str, inner: str, *, form_id: str = "", css: str = "") -> str:
    ident = f' id="{esc(form_id)}"' if form_id else ""
    klass = f' class="{esc(css)}"' if css else ""
    return f'<form method=post action="{esc(action)}"{ident}{klass}>{_csrf(token)}{inner}</form>'


def _error(error: str | None) -> str:
    return f'<p class="flash bad" id=error>{esc(error)}</p>' if error else ""


def _shell(title: str, body: str, username: str | None, token: str | None) -> str:
    who = ""
    if username is not None and token is not None:
        logout = _form(f"{BASE}/logout", token, "<button class=secondary id=logout>Sign out</button>")
        who = f"<div class=card>Signed in as <strong id=whoami>{esc(username)}</strong> {logout}</div>"
    return page(f"{title} — volthub developer", who + body, scripts=(SCRIPT,))


def render_login(token: str, error: str | None = None) -> str:
    inner = (
        "<label>Username <input name=username id=login-username autocomplete=username required></label>"
        "<label>Password <input name=password id=login-password type=password autocomplete=current-password"
        " required></label><button id=login-submit>Sign in</button>"
    )
    body = (
        "<h1>Developer dashboard</h1><p>Sign in with your volthub account.</p>"
        + _error(error)
        + _form(f"{BASE}/login", token, inner, form_id="login-form", css="stacked")
    )
    return page("Sign in — volthub developer", body)


def render_home(
    username: str,
    token: str,
    apps: Sequence[AppView],
    events: Iterable[str],
    *,
    notice: str | None = None,
    error: str | None = None,
) -> str:
    rows = "".join(
        f'<li class=app data-client-id="{esc(a.client_id)}"><a href="{BASE}/apps/{esc(a.client_id)}">'
        f"{esc(a.name)}</a> <code>{esc(a.client_id)}</code></li>"
        for a in apps
    )
    create = _form(
        f"{BASE}/apps",
        token,
        "<label>Name <input name=name required maxlength=50></label>"
        "<label>Redirect URIs (one per line) <textarea name=redirect_uris rows=2></textarea></label>"
        "<label>Logo URL (https) <input name=logo_url></label><button>Create app</button>",
        form_id="create-app",
        css="stacked",
    )
    options = "".join(f'<option value="{esc(name)}">{esc(name)}</option>' for name in events)
    test = _form(
        f"{BASE}/test-event",
        token,
        f"<label>Event <select name=event id=test-event-name>{options}</select></label>"
        "<label>Fields (key=value per line) <textarea name=fields rows=2></textarea></label>"
        "<label><span><input type=checkbox name=sockets value=1 checked> Events API (sockets, SSE)</span></label>"
        "<label><span><input type=checkbox name=webhooks value=1 checked> Webhooks (logged)</span></label>"
        "<button id=send-test>Send test event</button>",
        form_id="test-event",
        css="stacked",
    )
    result = f'<p class="flash ok" id=test-result>{esc(notice)}</p>' if notice else "<p id=test-result></p>"
    body = (
        "<h1>Developer dashboard</h1>"
        + _error(error)
        + f"<section><h2>Your apps</h2><ul id=apps>{rows or '<li class=muted>none yet</li>'}</ul>{create}</section>"
        + "<section><h2>Send a test event</h2><p class=muted>To your own channel, with <code>isTest: true</code>;"
        " nothing is stored except the webhook deliveries, which appear in the delivery log.</p>"
        + result
        + test
        + "</section><section><h2>Live event inspector</h2><p class=muted>Your channel's events as they arrive"
        " (server-sent events).</p>"
        '<p id=inspector-state class=muted data-src="/developer/events">connecting…</p>'
        "<pre id=inspector-log></pre></section>"
    )
    return _shell("Dashboard", body, username, token)


def render_app(
    username: str,
    token: str,
    app: AppView,
    grants: Sequence[GrantView],
    webhooks: Sequence[WebhookView],
    webhook_events: Iterable[str],
    *,
    secret: tuple[str, str] | None = None,
    error: str | None = None,
) -> str:
    base = f"{BASE}/apps/{esc(app.client_id)}"
    shown = ""
    if secret is not None:
        label, value = secret
        ident = "app-secret" if label == "client secret" else "webhook-secret"
        shown = (
            f'<p class="flash ok">New {esc(label)} (shown only now): '
            f'<span class=secret id="{ident}">{esc(value)}</span></p>'
        )
    logo = f'<img src="{esc(app.logo_url)}" alt="" width=48 height=48>' if app.logo_url else ""
    update = _form(
        base,
        token,
        f'<label>Name <input name=name value="{esc(app.name)}" required maxlength=50></label>'
        "<label>Redirect URIs (one per line) <textarea name=redirect_uris rows=3>"
        f"{esc(chr(10).join(app.redirect_uris))}</textarea></label>"
        f'<label>Logo URL (https) <input name=logo_url value="{esc(app.logo_url or "")}"></label>'
        "<button>Save</button>",
        form_id="update-app",
        css="stacked",
    )
    rotate = (
        ""
        if app.public
        else _form(
            f"{base}/rotate-secret",
            token,
            "<button class=secondary>Rotate client secret</button>",
            form_id="rotate-app-secret",
        )
    )
    grant_rows = "".join(
        f"<tr><td>{esc(g.username)}</td><td>{esc(' '.join(g.scopes) or '-')}</td><td>{esc(g.created_at)}</td></tr>"
        for g in grants
    )
    grants_table = (
        "<table id=grants><thead><tr><th>user</th><th>scopes held</th><th>since</th></tr></thead>"
        f"<tbody>{grant_rows or '<tr><td colspan=3 class=muted>no user has authorised this app</td></tr>'}</tbody></table>"
    )
    hooks = "".join(_webhook_row(base, token, w) for w in webhooks)
    options = "".join(f'<option value="{esc(name)}">{esc(name)}</option>' for name in webhook_events)
    create_hook = _form(
        f"{base}/webhooks",
        token,
        "<label>URL (https) <input name=url required></label>"
        f"<label>Events <select name=events multiple size=8 required>{options}</select></label>"
        "<button>Create webhook</button>",
        form_id="create-webhook",
        css="stacked",
    )
    body = (
        f'<p><a href="{BASE}">← dashboard</a></p><h1>{logo} {esc(app.name)}</h1>'
        f"<p>Client id <code id=client-id>{esc(app.client_id)}</code></p>"
        + _error(error)
        + shown
        + f"<section><h2>Settings</h2>{update}{rotate}</section>"
        + f"<section><h2>Users who authorised it</h2>{grants_table}</section>"
        + f"<section><h2>Webhooks</h2><ul id=webhooks>{hooks or '<li class=muted>none yet</li>'}</ul>{create_hook}</section>"
    )
    return _shell(app.name, body, username, token)


def _webhook_row(base: str, token: str, webhook: WebhookView) -> str:
    hook = f"{base}/webhooks/{esc(webhook.id)}"
    state = "enabled" if webhook.enabled else f"disabled ({esc(webhook.disabled_reason or 'by you')})"
    toggle = _form(
        f"{hook}/enabled",
        token,
        f'<input type=hidden name=enabled value="{"false" if webhook.enabled else "true"}">'
        f'<button class="secondary toggle">{"Disable" if webhook.enabled else "Enable"}</button>',
    )
    rotate = _form(f"{hook}/rotate-secret", token, "<button class='secondary rotate'>Rotate secret</button>")
    return (
        f'<li class=webhook data-webhook-id="{esc(webhook.id)}"><a href="{hook}">{esc(webhook.url)}</a> '
        f"<span class=state>{state}</span><br><span class=muted>{esc(', '.join(webhook.events))}</span>"
        f"{toggle}{rotate}</li>"
    )


def render_webhook(
    username: str,
    token: str,
    app: AppView,
    webhook: WebhookView,
    deliveries: Sequence[DeliveryView],
    *,
    error: str | None = None,
) -> str:
    hook = f"{BASE}/apps/{esc(app.client_id)}/webhooks/{esc(webhook.id)}"
    rows = "".join(_delivery_row(hook, token, d) for d in deliveries)
    body = (
        f'<p><a href="{BASE}/apps/{esc(app.client_id)}">← {esc(app.name)}</a></p>'
        f"<h1>Webhook <code>{esc(webhook.url)}</code></h1>"
        + _error(error)
        + f"<p>{'enabled' if webhook.enabled else 'disabled'} · {esc(', '.join(webhook.events))}</p>"
        "<h2>Delivery log</h2><table id=deliveries><thead><tr><th>event</th><th>event id</th><th>status</th>"
        "<th>attempts</th><th>next retry</th><th>response</th><th>latency</th><th></th></tr></thead>"
        f"<tbody>{rows or '<tr><td colspan=8 class=muted>no deliveries yet</td></tr>'}</tbody></table>"
    )
    return _shell("Webhook", body, username, token)


def _delivery_row(hook: str, token: str, d: DeliveryView) -> str:
    redeliver = _form(
        f"{hook}/deliveries/{esc(d.id)}/redeliver", token, "<button class='secondary redeliver'>Redeliver</button>"
    )
    response = "" if d.response_code is None else str(d.response_code)
    if d.error:
        response = f"{response} {d.error}".strip()
    latency = "" if d.latency_ms is None else f"{d.latency_ms} ms"
    again = " (redelivery)" if d.redelivery_of else ""
    return (
        f'<tr class=delivery data-event-id="{esc(d.event_id)}" data-status="{esc(d.status)}">'
        f"<td>{esc(d.event)}{again}</td><td><code>{esc(d.event_id)}</code></td><td class=status>{esc(d.status)}</td>"
        f"<td>{d.attempts}</td><td>{esc(d.next_attempt_at or '')}</td><td>{esc(response)}</td>"
        f"<td>{esc(latency)}</td><td>{redeliver}</td></tr>"
    )


def render_problem(title: str, message: str, status_note: str = "") -> str:
    body = f'<h1>{esc(title)}</h1><p id=error class="flash bad">{esc(message)}</p>{esc(status_note)}'
    body += f'<p><a href="{BASE}">Back to the dashboard</a></p>'
    return page(title, body)


def listify(value: Any) -> list[str]:
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]
