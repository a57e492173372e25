"""`volthub trigger` and `volthub token` — developer tools for local integration work.

- `trigger EVENT --channel USERNAME [--server URL --token T]`: a test event (`isTest: true`,
  nothing stored, no money or state moved) through the running server's delivery pipeline:
  the channel's Events API connections and its owner's webhooks (the sandbox route does the
  work, with `webhooks: true`).
- `trigger EVENT --forward URL --secret S`: one delivery straight to a URL, signed and shaped
  exactly as a real webhook delivery; no server needed. `http://` only to a loopback address.
- `trigger --list`: the events a test can send, with their payload fields.
- `token --user NAME (--client-id ID --scopes "a b" | --first-party)`: mints a token pair,
  recorded as a grant (an app's) or a session (first-party, `"volthub token"`) the user
  sees and can revoke (see volthub.services.oauth, volthub.services.sessions).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import ssl
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from volthub.cli import _common, command, failed, settings_from
from volthub.config import Settings
from volthub.protocol import trigger
from volthub.protocol.webhooks import delivery_headers, encode_delivery_body

USER_AGENT = "volthub-trigger/1"


# --- trigger -----------------------------------------------------------------------------


def _configure_trigger(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("event", metavar="EVENT", nargs="?", help="an emitted event name, or a sandbox type")
    parser.add_argument("--list", action="store_true", help="print the events and their payload fields")
    parser.add_argument("--json", action="store_true", help="with --list: one JSON document")
    parser.add_argument("--channel", metavar="USERNAME", help="send through the running server to this channel")
    parser.add_argument("--server", metavar="URL", help="the server (default: [server] public_url, else host:port)")
    parser.add_argument("--token", metavar="T", help="a token of the channel's owner (default $VOLTHUB_TOKEN)")
    parser.add_argument("--forward", metavar="URL", help="POST one signed delivery to this URL, no server needed")
    parser.add_argument("--secret", metavar="S", help="the webhook signing secret (with --forward)")
    parser.add_argument("--ca-file", metavar="FILE", help="also trust this CA (with --forward to https)")
    parser.add_argument(
        "--field", metavar="K=V", action="append", default=[], help="set a payload field (V: JSON, else text)"
    )


@command("trigger", _configure_trigger)
def trigger_command(args: argparse.Namespace) -> int:
    """Send a test event: through the running server, or signed straight to a webhook URL."""
    _quiet_http_client()
    if args.list:
        return _list(args.json)
    if not args.event:
        return failed("give an EVENT (see --list)", status=2)
    try:
        entry = trigger.resolve(args.event)
        fields = trigger.parse_assignments(args.field)
        trigger.checked_fields(entry, fields)
    except trigger.UnknownTestEvent:
        return failed(f"{args.event!r} is not an emitted event nor a sandbox type (see --list)", status=2)
    except trigger.InvalidField as exc:
        return failed(f"--field {exc}", status=2)
    if args.forward:
        if args.channel:
            return failed("--forward and --channel are two different targets: give one", status=2)
        if not args.secret:
            return failed("--forward needs --secret (the webhook's signing secret)", status=2)
        return _forward(args, entry, fields)
    if not args.channel:
        return failed("give --channel USERNAME (through the server) or --forward URL --secret S", status=2)
    return _through_server(args, fields)


def _quiet_http_client() -> None:
    """httpx logs every request at INFO ("HTTP Request: …"): noise beside a tool's result.
    At `[logging] level = "debug"` they show again."""
    level = logging.WARNING if logging.getLogger().getEffectiveLevel() > logging.DEBUG else logging.NOTSET
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(level)


def _list(as_json: bool) -> int:
    events = trigger.listing()
    if as_json:
        print(orjson.dumps({"events": events}, option=orjson.OPT_INDENT_2).decode())
        return 0
    for event in events:
        via = ", ".join(k for k, on in (("events api", event["eventsApi"]), ("webhooks", event["webhooks"])) if on)
        aliases = f"  (alias: {', '.join(event['aliases'])})" if event["aliases"] else ""
        print(f"{event['name']}  [{via}]{aliases}")
        for field in event["fields"]:
            optional = ", optional" if field["optional"] else ""
            print(f"    {field['name']}: {field['type']}{optional}  {field['description']}")
    return 0


def _forward(args: argparse.Namespace, entry: Any, fields: dict[str, Any]) -> int:
    problem = _forward_target_problem(args.forward)
    if problem:
        return failed(problem, status=2)
    now_ms = int(time.time() * 1000)
    at = _iso(now_ms)
    channel = trigger.Channel(str(uuid.uuid4()), args.channel or "test_channel", "TestChannel")
    data = trigger.sample(entry, channel, at, fields)
    event_id = str(uuid.uuid4())
    body = encode_delivery_body(event_id, entry.name, at, data)
    headers = {**delivery_headers(args.secret, event_id, entry.name, now_ms, body), "User-Agent": USER_AGENT}
    verify = ssl.create_default_context()
    if args.ca_file:
        verify.load_verify_locations(cafile=args.ca_file)
    try:
        with httpx.Client(verify=verify, timeout=10, follow_redirects=False, trust_env=False) as client:
            response = client.post(args.forward, content=body, headers=headers)
    except httpx.HTTPError as exc:
        return failed(f"{args.forward}: {type(exc).__name__}: {exc}")
    print(orjson.dumps({"eventId": event_id, "event": entry.name, "status": response.status_code}).decode())
    return 0 if 200 <= response.status_code <= 299 else 1


def _forward_target_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and _loopback(parts.hostname):
        return None
    return f"--forward {url!r}: an https:// URL (http:// only to a loopback address)"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _iso(now_ms: int) -> str:
    from volthub.hub.clock import iso8601

    return iso8601(now_ms)


def _through_server(args: argparse.Namespace, fields: dict[str, Any]) -> int:
    token = args.token or os.environ.get("VOLTHUB_TOKEN")
    if not token:
        return failed(
            "give --token (or set VOLTHUB_TOKEN); `volthub token --user NAME --first-party` mints one", status=2
        )
    base = (args.server or _configured_server(settings_from(args))).rstrip("/")
    _quiet_http_client()  # again: the settings may have set the level anew
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
            me = client.get("/api/users/me", headers=headers)
            if me.status_code != 200:
                return _server_error(me)
            owner = me.json()
            if owner["username"].lower() != args.channel.lower():
                return failed(
                    f"the token is {owner['username']}'s: a test event goes to the token owner's channel", status=2
                )
            body = {"eventType": args.event, "channelId": owner["id"], "webhooks": True}
            if fields:
                body["fields"] = fields
            sent = client.post("/api/integrations/oauth/test/events", headers=headers, json=body)
    except httpx.HTTPError as exc:
        return failed(f"{base}: {type(exc).__name__}: {exc}")
    if sent.status_code != 200:
        return _server_error(sent)
    print(orjson.dumps(sent.json(), option=orjson.OPT_INDENT_2).decode())
    return 0


def _configured_server(settings: Settings) -> str:
    if settings.server.public_url:
        return settings.server.public_url
    host = settings.server.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{settings.server.port}"


def _server_error(response: httpx.Response) -> int:
    try:
        problem = response.json()
        text = f"{problem.get('error')}: {problem.get('message')}"
    except ValueError:
        text = response.text[:200]
    return failed(f"HTTP {response.status_code} {text}")


# --- token -------------------------------------------------------------------------------


def _configure_token(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--user", metavar="NAME", required=True, help="whose token (a username)")
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--client-id", metavar="ID", help="an app's token, recorded as a grant of that app")
    kind.add_argument("--first-party", action="store_true", help="a first-party session token (as sign-in gives)")
    parser.add_argument("--scopes", metavar='"A B"', default="", help="space-separated scopes (with --client-id)")


@command("token", _configure_token)
def token_command(args: argparse.Namespace) -> int:
    """Mint a token pair for local development, printed as JSON."""
    from volthub.protocol.oauth.scopes import InvalidScope, format_scope, parse_scope

    if args.first_party and args.scopes:
        return failed("--scopes goes with --client-id: a first-party token is not scoped", status=2)
    try:
        scope = format_scope(parse_scope(args.scopes).requested)
    except InvalidScope as exc:
        return failed(str(exc), status=2)
    import trio

    return trio.run(_mint, settings_from(args), args, scope)


async def _mint(settings: Settings, args: argparse.Namespace, scope: str) -> int:
    from volthub.cli import _open
    from volthub.hub.brokers import open_broker
    from volthub.hub.bus import InProcessBroker
    from volthub.hub.clock import SystemClock, to_ms
    from volthub.hub.publisher import EventPublisher
    from volthub.persistence import migrate
    from volthub.persistence import secrets as secret_store
    from volthub.persistence import users as users_repo
    from volthub.services.oauth import OAuthError, build_oauth_service
    from volthub.services.sessions import DEV_TOKEN, Sessions
    from volthub.services.tokens import TokenService
    from volthub.services.webhooks import OutboxSink

    clock = SystemClock()
    database = await _open(settings)
    try:
        await migrate(database)
        secret = settings.auth.token_secret or await database.write(
            secret_store.get_or_create("token_secret", to_ms(clock.now()))
        )
        tokens = TokenService(secret, clock, settings.auth.session_ttl_seconds)
        # The grant's event reaches the app owner's webhooks (outbox) and, through the
        # deployment's event log, the running servers, as a consent would.
        logged_by = open_broker(settings, database, clock)
        publisher = EventPublisher(database, InProcessBroker(), clock, event_log=logged_by)
        publisher.add_transaction_sink(OutboxSink(float(settings.webhooks.retry_delays[0])))
        if args.first_party:
            user = await database.read(lambda tx: users_repo.get_by_username_insensitive(tx, args.user))
            if user is None:
                return failed(f"no user named {args.user!r}")
            # A stored session, listed and revocable like a sign-in's; no refresh token.
            sessions = Sessions(database, publisher, clock, tokens, cache_seconds=0)
            made = await sessions.issue(user.id, DEV_TOKEN)
            out = {
                "access_token": made.token,
                "refresh_token": None,
                "expires_in": made.expires_at - int(clock.now()),
            }
            print(orjson.dumps({**out, "scope": ""}).decode())
            return 0
        oauth = build_oauth_service(database, publisher, clock, settings.oauth)
        try:
            issued = await oauth.mint(args.user, args.client_id, scope)
        except OAuthError as exc:
            return failed(f"{exc.error}: {exc.message}")
        ttl = settings.oauth.access_token_ttl_seconds
        access, _ = tokens.issue_access(issued.user_id, issued.client_id, issued.scope, issued.grant_id, ttl)
        out = {"access_token": access, "refresh_token": issued.refresh_token, "expires_in": ttl, "scope": issued.scope}
        print(orjson.dumps(out).decode())
        return 0
    finally:
        await database.close()
