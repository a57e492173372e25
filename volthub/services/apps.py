"""Developer apps (OAuth clients), managed by their owner.

`owned_app` is the one ownership check: an app that does not exist, whose client id is not
plausible, or that belongs to someone else is `AppNotFound` alike (a 404 that does not tell
the caller someone else's app exists). Client secrets are stored as SHA-256 digests and
returned only by `create` and `rotate_secret`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import apps as repo
from volthub.persistence import oauth as oauth_repo
from volthub.persistence import users as users_repo
from volthub.persistence.apps import App
from volthub.protocol.oauth.client_auth import plausible_client_id
from volthub.services.oauth import CLIENT_SECRET_PREFIX, OAuthService, digest, new_secret

__all__ = ["App", "AppFields", "AppNotFound", "Apps", "PublicClient", "owned_app"]


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class AppNotFound(Exception):
    client_id: str


class PublicClient(Exception):
    """A public client has no secret (to rotate)."""


def owned_app(tx: Tx, owner_id: str, client_id: str) -> App:
    """The caller's app, else `AppNotFound` (also for someone else's app)."""
    app = repo.get_app(tx, client_id) if plausible_client_id(client_id) else None
    if app is None or app.owner_id != owner_id:
        raise AppNotFound(client_id)
    return app


@dataclass(frozen=True)
class AppFields:
    name: str
    description: str
    logo_url: str | None
    redirect_uris: list[str]
    bot_app: bool
    public: bool


class Apps:
    def __init__(self, database: Database, clock: Clock, oauth: OAuthService) -> None:
        self._db = database
        self._clock = clock
        self._oauth = oauth

    def _now_ms(self) -> int:
        return to_ms(self._clock.now())

    async def find(self, client_id: str) -> App | None:
        """Any app by client id (OAuth endpoints); None when unknown or implausible."""
        if not plausible_client_id(client_id):
            return None
        return await self._db.read(lambda tx: repo.get_app(tx, client_id))

    async def owned(self, owner_id: str, client_id: str) -> App:
        return await self._db.read(lambda tx: owned_app(tx, owner_id, client_id))

    async def of_owner(self, owner_id: str) -> list[App]:
        """The owner's apps, oldest first."""
        return await self._db.read(lambda tx: repo.apps_of_owner(tx, owner_id))

    async def create(self, owner_id: str, fields: AppFields) -> tuple[App, str | None]:
        """The new app and its client secret (None for a public client)."""
        secret = None if fields.public else new_secret(CLIENT_SECRET_PREFIX)
        now = self._now_ms()

        def create(tx: Tx) -> App:
            return repo.create_app(
                tx,
                client_id=str(uuid.uuid4()),
                owner_id=owner_id,
                name=fields.name,
                description=fields.description,
                logo_url=fields.logo_url,
                redirect_uris=list(fields.redirect_uris),
                client_secret_hash=digest(secret) if secret else None,
                bot_app=fields.bot_app,
                now_ms=now,
            )

        return await self._db.write(create), secret

    async def update(self, owner_id: str, client_id: str, changes: dict[str, Any]) -> App:
        """Apply `changes` (keys: name, description, logo_url, redirect_uris, bot_app)."""
        now = self._now_ms()

        def update(tx: Tx) -> App:
            owned_app(tx, owner_id, client_id)
            app = repo.update_app(tx, client_id, changes, now)
            if app is None:
                raise AppNotFound(client_id)
            return app

        return await self._db.write(update)

    async def delete(self, owner_id: str, client_id: str) -> None:
        """Every user's grant is revoked first (with its events); webhooks go with the app."""
        await self.owned(owner_id, client_id)
        await self._oauth.delete_app(client_id)

    async def rotate_secret(self, owner_id: str, client_id: str) -> tuple[App, str]:
        """A new secret; the old one stops working at once. `PublicClient` for a public app."""
        if (await self.owned(owner_id, client_id)).is_public:
            raise PublicClient(client_id)
        secret, now = new_secret(CLIENT_SECRET_PREFIX), self._now_ms()

        def rotate(tx: Tx) -> App:
            owned_app(tx, owner_id, client_id)
            repo.set_secret_hash(tx, client_id, digest(secret), now)
            app = repo.get_app(tx, client_id)
            assert app is not None
            return app

        return await self._db.write(rotate), secret

    async def scope_grants(self, owner_id: str, client_id: str) -> dict[str, int]:
        """The sensitive scopes an operator granted the caller's app -> when (epoch ms)."""

        def read(tx: Tx) -> dict[str, int]:
            owned_app(tx, owner_id, client_id)
            return oauth_repo.app_scope_grants(tx, client_id)

        return await self._db.read(read)

    async def user_grants(self, owner_id: str, client_id: str) -> list[UserGrant]:
        """The active grants users gave the caller's app, oldest first, with their usernames."""

        def read(tx: Tx) -> list[UserGrant]:
            owned_app(tx, owner_id, client_id)
            found = []
            for grant in oauth_repo.active_grants_of_app(tx, client_id):
                user = users_repo.get_by_id(tx, grant.user_id)
                name = user.username if user is not None else grant.user_id
                found.append(UserGrant(grant.id, grant.user_id, name, sorted(grant.held), grant.created_at))
            return found

        return await self._db.read(read)


@dataclass(frozen=True)
class UserGrant:
    grant_id: str
    user_id: str
    username: str
    scopes: list[str]
    created_at: int
