"""`volthub emotes | badges | teams` — the operator's controls over the catalogue.

- `emotes add CODE FILE [--channel USERNAME]` adds a global emote (or a channel's) from an
  image file, with the same type and size checks as uploads; `emotes remove CODE
  [--channel USERNAME]`; `emotes list [--channel USERNAME]`.
- `badges award USERNAME SLUG [--channel USERNAME]`, `badges withdraw …`, `badges list`.
- `teams create SLUG NAME [--description TEXT]`, `teams delete SLUG`,
  `teams add-member SLUG USERNAME [--owner]`, `teams remove-member SLUG USERNAME`, `teams list`.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from volthub.cli import _common, _open, command, failed, settings_from
from volthub.config import Settings

# The services are imported when a command runs, not when the command is registered:
# every `volthub` command registers these, and `volthub serve --workers` must choose
# where its workers keep their metrics before the first metric is created.


def _parsers(parser: argparse.ArgumentParser, actions: dict[str, tuple[str, tuple[str, ...], bool]]) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    for name, (text, positionals, with_channel) in actions.items():
        action = sub.add_parser(name, help=text)
        _common(action)
        for positional in positionals:
            action.add_argument(positional.lower(), metavar=positional)
        if with_channel:
            action.add_argument("--channel", metavar="USERNAME", help="a channel's instead of global")
        if name == "create":
            action.add_argument("--description", default="")
        if name == "add-member":
            action.add_argument("--owner", action="store_true", help="as the team's owner")


EMOTE_ACTIONS = {
    "add": ("add an emote from an image file", ("CODE", "FILE"), True),
    "remove": ("remove an emote", ("CODE",), True),
    "list": ("list emotes", (), True),
}
BADGE_ACTIONS = {
    "award": ("award a badge to a user", ("USERNAME", "SLUG"), True),
    "withdraw": ("withdraw an awarded badge", ("USERNAME", "SLUG"), True),
    "list": ("list the badge catalogue", (), False),
}
TEAM_ACTIONS = {
    "create": ("create a team", ("SLUG", "NAME"), False),
    "delete": ("delete a team", ("SLUG",), False),
    "add-member": ("add a channel to a team", ("SLUG", "USERNAME"), False),
    "remove-member": ("remove a channel from a team", ("SLUG", "USERNAME"), False),
    "list": ("list teams", (), False),
}

Handler = Callable[[Settings, Any, argparse.Namespace], Awaitable[int]]


def _run(args: argparse.Namespace, handler: Handler) -> int:
    settings = settings_from(args)

    from volthub.persistence import migrate
    from volthub.services.catalogue import TeamExists, TeamNotFound
    from volthub.services.channels import ChannelNotFound
    from volthub.services.emotes import EmoteExists, EmoteNotFound
    from volthub.services.media import UploadRefused

    async def main() -> int:
        database = await _open(settings)
        try:
            await migrate(database)
            return await handler(settings, database, args)
        except (ChannelNotFound, TeamNotFound) as exc:
            return failed(f"not found: {exc}")
        except (EmoteExists, TeamExists) as exc:
            return failed(f"already exists: {exc}")
        except (EmoteNotFound, LookupError, ValueError) as exc:
            return failed(str(exc))
        except UploadRefused as exc:
            return failed(exc.message)
        finally:
            await database.close()

    return trio.run(main)


async def _emotes(settings: Settings, database: Any, args: argparse.Namespace) -> int:
    from volthub.hub.clock import SystemClock
    from volthub.services.emotes import Emotes
    from volthub.services.media import MediaStore, check_image

    clock = SystemClock()
    media = MediaStore(database, clock, storage=settings.media.storage, directory=settings.media.directory)
    emotes = Emotes(
        database, clock, media, max_bytes=settings.media.emote_max_bytes, max_side=settings.media.emote_max_side
    )
    channel_id = await emotes.channel_id(args.channel) if args.channel else None
    if args.action == "add":
        data = await trio.to_thread.run_sync(Path(args.file).read_bytes)
        emote = await emotes.add(
            channel_id, args.code, check_image(data, None, emotes.max_bytes, emotes.max_side), None
        )
        print(f"{emote.code}\t{emote.id}\tadded")
    elif args.action == "remove":
        await emotes.remove(channel_id, args.code)
        print(f"{args.code}\tremoved")
    else:
        found = (await emotes.of_channel(args.channel))[1] if args.channel else await emotes.global_set()
        for emote in found:
            print(f"{emote.code}\t{emote.id}\t{emote.media_id}")
    return 0


async def _badges(settings: Settings, database: Any, args: argparse.Namespace) -> int:
    from volthub.hub.clock import SystemClock
    from volthub.services.catalogue import BadgeCatalogue

    badges = BadgeCatalogue(database, SystemClock())
    if args.action == "award":
        created = await badges.award(args.username, args.slug, args.channel)
        print(f"{args.username}\t{args.slug}\t{'awarded' if created else 'already awarded'}")
    elif args.action == "withdraw":
        removed = await badges.withdraw(args.username, args.slug, args.channel)
        print(f"{args.username}\t{args.slug}\t{'withdrawn' if removed else 'was not awarded'}")
    else:
        for badge in await badges.catalogue(None):
            print(f"{badge.slug}\t{badge.category}\t{badge.title}")
    return 0


async def _teams(settings: Settings, database: Any, args: argparse.Namespace) -> int:
    from volthub.hub.clock import SystemClock
    from volthub.services.catalogue import Teams

    teams = Teams(database, SystemClock())
    if args.action == "create":
        team = await teams.create(args.slug, args.name, args.description)
        print(f"{team.slug}\t{team.id}\tcreated")
    elif args.action == "delete":
        print(f"{args.slug}\t{'deleted' if await teams.delete(args.slug) else 'no such team'}")
        return 0
    elif args.action == "add-member":
        added = await teams.add_member(args.slug, args.username, "owner" if args.owner else "member")
        print(f"{args.slug}\t{args.username}\t{'added' if added else 'role updated'}")
    elif args.action == "remove-member":
        removed = await teams.remove_member(args.slug, args.username)
        print(f"{args.slug}\t{args.username}\t{'removed' if removed else 'was not a member'}")
    else:
        cursor = None
        while True:
            found, cursor = await teams.page(100, cursor)
            for team in found:
                print(f"{team.slug}\t{team.name}\t{team.member_count}")
            if cursor is None:
                break
    return 0


@command("emotes", lambda parser: _parsers(parser, EMOTE_ACTIONS))
def emotes_command(args: argparse.Namespace) -> int:
    """Global and channel emotes: add, remove, list."""
    return _run(args, _emotes)


@command("badges", lambda parser: _parsers(parser, BADGE_ACTIONS))
def badges_command(args: argparse.Namespace) -> int:
    """Badges: award, withdraw, list the catalogue."""
    return _run(args, _badges)


@command("teams", lambda parser: _parsers(parser, TEAM_ACTIONS))
def teams_command(args: argparse.Namespace) -> int:
    """Teams: create, delete, add-member, remove-member, list."""
    return _run(args, _teams)
