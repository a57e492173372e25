"""`volthub apps list | review | grant | revoke` — the operator's controls over developer apps.

- `review CLIENT_ID [--unset]` sets the reviewed badge shown on the consent screen.
- `grant CLIENT_ID SCOPE...` lets the app request sensitive scopes (while
  `[oauth] sensitive_scopes_need_review`); existing connections whose user consented to the
  scope get it back at their next token refresh.
- `revoke CLIENT_ID SCOPE...` withdraws such a grant; every connection of the app loses the
  scope at once (running servers see it within `[oauth] grant_cache_seconds`).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

import trio

from volthub.cli import _common, _open, command, failed, settings_from
from volthub.config import Settings
from volthub.protocol.oauth.scopes import ALIASES, SCOPE_NAMES, SENSITIVE_SCOPES

if TYPE_CHECKING:
    from volthub.persistence import Tx

# The database code is imported when a command runs, not when the command is registered:
# every `volthub` command registers this one, and `volthub serve --workers` must choose
# where its workers keep their metrics before the first metric is created.


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list apps with owner, flags and sensitive-scope grants")
    _common(listing)
    review = sub.add_parser("review", help="mark an app reviewed (shown on the consent screen)")
    _common(review)
    review.add_argument("client_id", metavar="CLIENT_ID")
    review.add_argument("--unset", action="store_true", help="remove the reviewed mark")
    scopes = ", ".join(sorted(SENSITIVE_SCOPES))
    for name, text in (("grant", "let an app request sensitive scopes"), ("revoke", "withdraw sensitive-scope grants")):
        action = sub.add_parser(
            name,
            help=text,
            description=f"{text[0].upper()}{text[1:]}. Sensitive scopes: {scopes}. Other scopes need no grant.",
        )
        _common(action)
        action.add_argument("client_id", metavar="CLIENT_ID")
        action.add_argument("scopes", metavar="SCOPE", nargs="+")


@command("apps", _configure)
def apps_command(args: argparse.Namespace) -> int:
    """Developer apps: list, review, grant or revoke sensitive scopes."""
    settings = settings_from(args)
    if args.action in ("grant", "revoke"):
        problem = _scope_problem(args.scopes)
        if problem:
            return failed(problem, status=2)
    return trio.run(_run, settings, args)


def _scope_problem(scopes: list[str]) -> str | None:
    for scope in scopes:
        if scope in ALIASES:
            return f"{scope} is a legacy alias; name the real scope ({ALIASES[scope] or 'none'})"
        if scope not in SCOPE_NAMES:
            return f"unknown scope {scope!r}"
        if scope not in SENSITIVE_SCOPES:
            return f"{scope} is not sensitive: every app may request it without a grant"
    return None


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    from volthub.persistence import migrate

    database = await _open(settings)
    try:
        await migrate(database)
        return int(await database.write(lambda tx: _act(tx, args)))
    finally:
        await database.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _act(tx: Tx, args: argparse.Namespace) -> int:
    """The action; every one but `list` names an app, which must exist."""
    from volthub.persistence import apps as apps_repo

    if args.action != "list" and apps_repo.get_app(tx, args.client_id) is None:
        return failed(f"no app with client id {args.client_id!r}")
    return _ACTIONS[args.action](tx, args)


def _list(tx: Tx, args: argparse.Namespace) -> int:
    from volthub.persistence import apps as apps_repo
    from volthub.persistence import oauth as oauth_repo
    from volthub.persistence import users as users_repo

    for app in apps_repo.list_apps(tx):
        owner = users_repo.get_by_id(tx, app.owner_id)
        grants = ",".join(sorted(oauth_repo.app_scope_grants(tx, app.client_id))) or "-"
        flags = (
            ",".join(f for f, on in (("reviewed", app.reviewed), ("public", app.is_public), ("bot", app.bot_app)) if on)
            or "-"
        )
        print(f"{app.client_id}\t{app.name}\t{owner.username if owner else app.owner_id}\t{flags}\t{grants}")
    return 0


def _review(tx: Tx, args: argparse.Namespace) -> int:
    from volthub.persistence import apps as apps_repo

    apps_repo.set_reviewed(tx, args.client_id, not args.unset, _now_ms())
    print(f"{args.client_id}\t{'not reviewed' if args.unset else 'reviewed'}")
    return 0


def _grant(tx: Tx, args: argparse.Namespace) -> int:
    from volthub.persistence import oauth as oauth_repo

    for scope in args.scopes:
        created = oauth_repo.grant_app_scope(tx, args.client_id, scope, _now_ms())
        print(f"{args.client_id}\t{scope}\t{'granted' if created else 'already granted'}")
    return 0


def _revoke(tx: Tx, args: argparse.Namespace) -> int:
    from volthub.persistence import oauth as oauth_repo

    for scope in args.scopes:
        removed, narrowed = oauth_repo.revoke_app_scope(tx, args.client_id, scope, _now_ms())
        state = f"revoked; removed from {narrowed} connection(s)" if removed else "was not granted"
        print(f"{args.client_id}\t{scope}\t{state}")
    return 0


_ACTIONS = {"list": _list, "review": _review, "grant": _grant, "revoke": _revoke}
