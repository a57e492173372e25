"""OAuth grants, authorization codes and refresh tokens (RFC 6749, RFC 7636, RFC 7009).

The state changes behind the OAuth routes. Each runs in one transaction; a failure that must
still change something (a replayed code or refresh token revokes its grant) is *returned*
from the transaction as an `OAuthError` and raised after the commit, so the revocation is
not rolled back with the refusal.

Scope semantics (aliases, sensitivity, PKCE) are the sans-IO code in `volthub.protocol.oauth`;
the app passes them in as `ScopeRules`, keeping the hub free of `http` imports.

Decisions:
- A grant remembers the scope string the user consented to and the real scopes it holds
  now. What it holds is the consent minus sensitive scopes the app lacks an operator grant
  for (while `[oauth] sensitive_scopes_need_review`). It is recomputed at every refresh, so
  a scope an operator (re-)grants an app reaches existing connections at their next refresh
  — within an access token's lifetime, no reconnection — and an operator's
  withdrawal applies at once. A user never gains a scope they did not consent to.
- Access tokens are stateless JWTs: revoking one (RFC 7009) revokes its whole grant.
- Events `user.authorization.grant` (when a code is redeemed and the grant exists) and
  `user.authorization.revoke` belong to the authorised app's owner's channel: the owner
  learns who connected (that app's webhooks, the owner's Events API connections), and
  nothing reaches the authorising user's own channel.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from volthub.config import OAuthSettings
from volthub.hub.clock import Clock, iso8601
from volthub.hub.publisher import Emitter, Event, EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import apps as apps_repo
from volthub.persistence import oauth as repo
from volthub.persistence import users as users_repo
from volthub.persistence.apps import App
from volthub.persistence.oauth import AuthorizationCode, Grant
from volthub.persistence.users import User
from volthub.protocol import catalogue
from volthub.protocol.catalogue import Person
from volthub.protocol.oauth import pkce
from volthub.protocol.oauth import scopes as scope_catalogue
from volthub.services.lookup_cache import LookupCache
from volthub.services.tokens import Claims

T = TypeVar("T")

# Prefixes make leaked values recognisable to secret scanners and to people.
CLIENT_SECRET_PREFIX = "vhcs_"
CODE_PREFIX = "vhac_"
REFRESH_PREFIX = "vhrt_"
# Used codes are kept this long past expiry so a late replay still revokes what it issued.
_CODE_RETENTION_MS = 24 * 3600 * 1000


class OAuthError(Exception):
    """An RFC 6749 §5.2 error: `error` is the code, the message says what to fix."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class VerifierMismatch(OAuthError):
    """The PKCE verifier was wrong: the code it was sent with is spent."""


@dataclass(frozen=True)
class ScopeRules:
    effective: Callable[[str], frozenset[str]]  # a scope string -> real scopes (aliases expanded)
    canonical: Callable[[Iterable[str]], str]  # scope strings -> one string in catalogue order
    sensitive: frozenset[str]
    verify_pkce: Callable[[object, object, object], bool]  # (verifier, challenge, method)


@dataclass(frozen=True)
class OAuthPolicy:
    access_ttl: int
    refresh_ttl: int
    code_ttl: int
    need_review: bool
    cache_seconds: float = 0.0


@dataclass(frozen=True)
class Issued:
    """What a successful token request hands back; the route mints the access JWT."""

    grant_id: str
    user_id: str
    client_id: str
    scope: str
    refresh_token: str


@dataclass(frozen=True)
class Connection:
    """An app a user has authorised: the real scopes its active grants hold now."""

    app: App
    held: frozenset[str]
    connected_at: int  # epoch ms of the oldest active grant
    updated_at: int


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(value: str) -> str:
    """SHA-256 is enough for 256-bit random values: nothing to brute-force, unlike passwords."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def secret_matches(app: App, secret: str) -> bool:
    if app.client_secret_hash is None:
        return False
    return hmac.compare_digest(digest(secret), app.client_secret_hash)


class OAuthService:
    def __init__(
        self, database: Database, publisher: EventPublisher, clock: Clock, rules: ScopeRules, policy: OAuthPolicy
    ) -> None:
        self._db = database
        self._publisher = publisher
        self._clock = clock
        self.rules = rules
        self.policy = policy
        # grant id -> the grant as stored (None: gone); forgotten when this process revokes
        # or re-scopes it
        self._cache: LookupCache[Grant | None] = LookupCache(clock, policy.cache_seconds)

    # --- scopes -------------------------------------------------------------------------------

    def allowed(self, scopes: Iterable[str], operator_grants: Iterable[str]) -> frozenset[str]:
        """The real scopes an app may hold out of `scopes`, given its operator grants."""
        granted = set(operator_grants)
        sensitive = self.rules.sensitive
        return frozenset(s for s in scopes if not self.policy.need_review or s not in sensitive or s in granted)

    def missing_review(self, scope: str, operator_grants: Iterable[str]) -> list[str]:
        """Sensitive real scopes in `scope` the app may not request yet, in catalogue order."""
        wanted = self.rules.effective(scope)
        lacking = wanted - self.allowed(wanted, operator_grants)
        return self.rules.canonical(lacking).split()

    def _held(self, tx: Tx, consented: str, client_id: str) -> frozenset[str]:
        return self.allowed(self.rules.effective(consented), repo.app_scope_grants(tx, client_id))

    def _token_scope(self, scope: str, held: frozenset[str]) -> str:
        """The strings of `scope` (legacy ones kept as sent) that confer nothing beyond `held`."""
        return " ".join(t for t in scope.split() if self.rules.effective(t) <= held)

    # --- apps ---------------------------------------------------------------------------------

    async def delete_app(self, client_id: str) -> bool:
        """Revokes every connection (with its events), then deletes the app."""

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> bool:
            grants = repo.active_grants_of_app(tx, client_id)
            self._revoke(tx, emitter, [g.id for g in grants], "app_deleted", touched)
            return apps_repo.delete_app(tx, client_id)

        return await self._write(change)

    # --- authorize ----------------------------------------------------------------------------

    async def issue_code(
        self,
        *,
        user_id: str,
        client_id: str,
        redirect_uri: str,
        redirect_uri_sent: bool,
        scope: str,
        code_challenge: str | None,
        code_challenge_method: str | None,
    ) -> str:
        """The user approved: a single-use code bound to client, redirect URI and challenge."""
        code = new_secret(CODE_PREFIX)

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> None:
            now = emitter.now_ms
            repo.purge_expired(tx, now - _CODE_RETENTION_MS, now)
            repo.insert_code(
                tx,
                AuthorizationCode(
                    code_hash=digest(code),
                    client_id=client_id,
                    user_id=user_id,
                    redirect_uri=redirect_uri,
                    redirect_uri_sent=redirect_uri_sent,
                    scope=scope,
                    code_challenge=code_challenge,
                    code_challenge_method=code_challenge_method if code_challenge else None,
                    created_at=now,
                    expires_at=now + self.policy.code_ttl * 1000,
                ),
            )

        await self._write(change)
        return code

    # --- token endpoint -----------------------------------------------------------------------

    async def exchange_code(
        self, client_id: str, code: str, redirect_uri: str | None, code_verifier: str | None
    ) -> Issued:
        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> Issued | OAuthError:
            found = repo.get_code(tx, digest(code))
            if found is None or found.client_id != client_id:
                return OAuthError("invalid_grant", "authorization code is not valid for this client")
            if found.used_at is not None:
                return self._replayed(tx, emitter, found, touched)
            problem = self._code_problem(found, emitter.now_ms, redirect_uri, code_verifier)
            if isinstance(problem, VerifierMismatch):
                # RFC 6749 §4.1.2: a code is single-use, so a wrong guess at its verifier
                # spends it; the holder of a stolen code gets one guess, not many.
                repo.consume_code(tx, found.code_hash, emitter.now_ms)
            if problem is not None:
                return problem
            if not repo.consume_code(tx, found.code_hash, emitter.now_ms):
                # A concurrent exchange won (PostgreSQL); it committed, so read its grant.
                return self._replayed(tx, emitter, repo.get_code(tx, found.code_hash) or found, touched)
            return self._new_grant(tx, emitter, found)

        return self._raise_or_return(await self._write(change))

    def _code_problem(
        self, code: AuthorizationCode, now_ms: int, redirect_uri: str | None, verifier: str | None
    ) -> OAuthError | None:
        if code.expires_at <= now_ms:
            return OAuthError("invalid_grant", "authorization code has expired")
        # RFC 6749 §4.1.3: required and identical when the authorization request sent it.
        if (code.redirect_uri_sent or redirect_uri) and redirect_uri != code.redirect_uri:
            return OAuthError("invalid_grant", "redirect_uri does not match the one of the authorization request")
        if code.code_challenge:
            if not verifier:
                return OAuthError(
                    "invalid_request", "code_verifier is required: the authorization request sent a code_challenge"
                )
            if not self.rules.verify_pkce(verifier, code.code_challenge, code.code_challenge_method):
                return VerifierMismatch("invalid_grant", "code_verifier does not match the code_challenge")
        elif verifier:
            # RFC 9700 §2.1.1: refuse, so PKCE cannot be silently downgraded.
            return OAuthError(
                "invalid_request", "code_verifier was sent but the authorization request had no code_challenge"
            )
        return None

    def _replayed(self, tx: Tx, emitter: Emitter, code: AuthorizationCode, touched: list[str]) -> OAuthError:
        """RFC 6749 §4.1.2: a code used twice revokes the tokens it issued."""
        self._revoke(tx, emitter, [code.grant_id] if code.grant_id else [], "code_replayed", touched)
        return OAuthError("invalid_grant", "authorization code was already used; the tokens issued with it are revoked")

    def _new_grant(self, tx: Tx, emitter: Emitter, code: AuthorizationCode) -> Issued | OAuthError:
        app = apps_repo.get_app(tx, code.client_id)
        user = users_repo.get_by_id(tx, code.user_id)
        if app is None or user is None:
            return OAuthError("invalid_grant", "the app or the user of this code no longer exists")
        issued = self._grant(tx, emitter, app, user, code.scope)
        repo.attach_grant(tx, code.code_hash, issued.grant_id)
        return issued

    async def mint(self, username: str, client_id: str, scope: str) -> Issued:
        """A grant made without the consent screen, for local development (`volthub token`):
        recorded, listed and revocable like any other. Sensitive scopes the operator has not
        granted the app are refused (`invalid_scope`), as the consent screen refuses them."""

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> Issued | OAuthError:
            user = users_repo.get_by_username_insensitive(tx, username)
            if user is None:
                return OAuthError("invalid_request", f"no user named {username!r}")
            app = apps_repo.get_app(tx, client_id)
            if app is None:
                return OAuthError("invalid_client", f"no app with client id {client_id!r}")
            lacking = self.missing_review(scope, repo.app_scope_grants(tx, client_id))
            if lacking:
                return OAuthError(
                    "invalid_scope",
                    f"sensitive scopes need an operator grant first: volthub apps grant {client_id} {' '.join(lacking)}",
                )
            return self._grant(tx, emitter, app, user, scope)

        return self._raise_or_return(await self._write(change))

    def _grant(self, tx: Tx, emitter: Emitter, app: App, user: User, scope: str) -> Issued:
        """A new active grant of `scope` (what the operator allows of it) with a refresh token,
        and its `user.authorization.grant` event."""
        now = emitter.now_ms
        held = self._held(tx, scope, app.client_id)
        grant = repo.create_grant(
            tx,
            grant_id=str(uuid.uuid4()),
            user_id=user.id,
            client_id=app.client_id,
            consented_scope=scope,
            held=held,
            now_ms=now,
        )
        refresh = self._new_refresh_token(tx, grant.id, now)
        data = catalogue.user_authorization_grant(
            user=Person.of(user),
            client_id=app.client_id,
            app_name=app.name,
            scopes=self._real_list(held),
            granted_at=iso8601(now),
        )
        emitter.emit(app.owner_id, "user.authorization.grant", data)
        return Issued(grant.id, user.id, app.client_id, self._token_scope(scope, held), refresh)

    def _new_refresh_token(self, tx: Tx, grant_id: str, now_ms: int) -> str:
        token = new_secret(REFRESH_PREFIX)
        repo.insert_refresh_token(tx, digest(token), grant_id, now_ms, now_ms + self.policy.refresh_ttl * 1000)
        return token

    async def refresh(self, client_id: str, refresh_token: str, requested_scope: str | None) -> Issued:
        """Rotate the refresh token; a rotated one presented again revokes the grant."""

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> Issued | OAuthError:
            now = emitter.now_ms
            token = repo.get_refresh_token(tx, digest(refresh_token))
            grant = repo.get_grant(tx, token.grant_id) if token else None
            if token is None or grant is None or grant.client_id != client_id:
                return OAuthError("invalid_grant", "refresh token is not valid for this client")
            if not grant.active:
                return OAuthError("invalid_grant", "refresh token has been revoked")
            if token.rotated_at is None and token.expires_at <= now:
                return OAuthError("invalid_grant", "refresh token has expired")
            if token.rotated_at is not None or not repo.rotate_refresh_token(tx, token.token_hash, now):
                self._revoke(tx, emitter, [grant.id], "refresh_token_reused", touched)
                return OAuthError("invalid_grant", "refresh token was already used; its grant is revoked")
            touched.append(grant.id)  # its held scopes are recomputed: drop the cached ones
            return self._refreshed(tx, grant, requested_scope, now)

        return self._raise_or_return(await self._write(change))

    def _refreshed(self, tx: Tx, grant: Grant, requested: str | None, now_ms: int) -> Issued:
        consented = self.rules.effective(grant.consented_scope)
        if requested is not None:
            beyond = self.rules.effective(requested) - consented
            if beyond:
                # Raised, not returned: nothing of this request may be kept (the rotation).
                raise OAuthError("invalid_scope", f"scope beyond what the user granted: {self.rules.canonical(beyond)}")
        held = self._held(tx, grant.consented_scope, grant.client_id)
        repo.set_held_scope(tx, grant.id, held, now_ms)
        scope = self._token_scope(requested if requested is not None else grant.consented_scope, held)
        refresh = self._new_refresh_token(tx, grant.id, now_ms)
        return Issued(grant.id, grant.user_id, grant.client_id, scope, refresh)

    # --- revocation -----------------------------------------------------------------------------

    async def revoke_refresh_token(self, client_id: str, refresh_token: str) -> None:
        """RFC 7009: revokes the token's grant; unknown tokens are fine (nothing to do)."""

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> OAuthError | None:
            token = repo.get_refresh_token(tx, digest(refresh_token))
            grant = repo.get_grant(tx, token.grant_id) if token else None
            return self._revoke_for_client(tx, emitter, grant, client_id, touched)

        self._raise_or_return(await self._write(change))

    async def revoke_grant_for_client(self, client_id: str, grant_id: str) -> None:
        """RFC 7009 for an access token: it is stateless, so its grant goes."""

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> OAuthError | None:
            return self._revoke_for_client(tx, emitter, repo.get_grant(tx, grant_id), client_id, touched)

        self._raise_or_return(await self._write(change))

    def _revoke_for_client(
        self, tx: Tx, emitter: Emitter, grant: Grant | None, client_id: str, touched: list[str]
    ) -> OAuthError | None:
        if grant is None:
            return None
        if grant.client_id != client_id:
            return OAuthError("unauthorized_client", "this token was issued to another client")
        self._revoke(tx, emitter, [grant.id], "revoked_by_client", touched)
        return None

    async def revoke_connection(self, user_id: str, client_id: str) -> bool:
        """The user disconnects an app: every active grant of theirs to it. False if none."""

        def change(tx: Tx, emitter: Emitter, touched: list[str]) -> bool:
            grants = repo.active_grants(tx, user_id, client_id)
            self._revoke(tx, emitter, [g.id for g in grants], "revoked_by_user", touched)
            return bool(grants)

        return await self._write(change)

    def _revoke(self, tx: Tx, emitter: Emitter, grant_ids: list[str], reason: str, touched: list[str]) -> None:
        """Revoke grants; one `user.authorization.revoke` per user and app affected."""
        done = repo.revoke_grants(tx, grant_ids, emitter.now_ms, reason)
        touched.extend(g.id for g in done)
        by_connection: dict[tuple[str, str], set[str]] = {}
        for grant in done:
            by_connection.setdefault((grant.user_id, grant.client_id), set()).update(grant.held)
        for (user_id, client_id), held in by_connection.items():
            user = users_repo.get_by_id(tx, user_id)
            app = apps_repo.get_app(tx, client_id)
            if user is None or app is None:
                continue
            data = catalogue.user_authorization_revoke(
                user=Person.of(user),
                client_id=app.client_id,
                app_name=app.name,
                scopes=self._real_list(held),
                revoked_at=iso8601(emitter.now_ms),
            )
            emitter.emit(app.owner_id, "user.authorization.revoke", data)

    # --- access tokens ----------------------------------------------------------------------------

    async def held_scopes(self, grant_id: str, user_id: str, client_id: str) -> frozenset[str] | None:
        """What the grant behind an access token confers now; None once revoked or gone.

        Cached for `cache_seconds`. A grant revoked or re-scoped in this process leaves the
        cache at once, and a lookup that overlapped such a change is not cached.
        """
        grant = await self._cache.get(grant_id, lambda: self._db.read(lambda tx: repo.get_grant(tx, grant_id)))
        ok = grant is not None and grant.active and grant.user_id == user_id and grant.client_id == client_id
        return grant.held if ok and grant is not None else None

    async def token_scopes(self, claims: Claims) -> frozenset[str] | None:
        """What an OAuth access token may do now: its scopes within what its grant holds;
        None once the grant is revoked (volthub.http.access)."""
        if claims.grant_id is None or claims.client_id is None:
            return None
        held = await self.held_scopes(claims.grant_id, claims.user_id, claims.client_id)
        return None if held is None else self.rules.effective(claims.scope) & held

    async def operator_grants(self, client_id: str) -> dict[str, int]:
        """Sensitive scopes an operator granted the app -> when (epoch ms)."""
        return await self._db.read(lambda tx: repo.app_scope_grants(tx, client_id))

    # --- a user's connected apps -----------------------------------------------------------------

    async def connections(self, user_id: str) -> list[Connection]:
        """Apps the user has authorised (with at least one active grant), oldest grant first."""

        def read(tx: Tx) -> list[Connection]:
            grouped: dict[str, list[Grant]] = {}
            for grant in repo.active_grants(tx, user_id):
                grouped.setdefault(grant.client_id, []).append(grant)
            found = []
            for client_id, grants in grouped.items():
                app = apps_repo.get_app(tx, client_id)
                if app is None:
                    continue
                held = frozenset().union(*(g.held for g in grants))
                connected = min(g.created_at for g in grants)
                found.append(Connection(app, held, connected, max(g.updated_at for g in grants)))
            return found

        return await self._db.read(read)

    # --- plumbing ---------------------------------------------------------------------------------

    async def _write(self, change: Callable[[Tx, Emitter, list[str]], T]) -> T:
        """Run `change` with a list it appends the ids of grants it revoked or re-scoped to;
        those leave the cache once the transaction is over."""
        touched: list[str] = []
        try:
            return await self._publisher.write(lambda tx, emitter: change(tx, emitter, touched))
        finally:
            for grant_id in touched:
                self._cache.forget(grant_id)

    @staticmethod
    def _raise_or_return(result: T | OAuthError) -> T:
        if isinstance(result, OAuthError):
            raise result
        return result

    def _real_list(self, scopes: Iterable[str]) -> list[str]:
        return self.rules.canonical(scopes).split()

    def invalidate_cache(self) -> None:
        self._cache.clear()

    def on_event(self, event: Event) -> None:
        """A grant revoked anywhere (another process: through the bus relay) leaves this
        process's cache at once, so no process serves a revoked grant from its cache. The
        event names the user and the app, not the grant: revocations are rare, so the
        whole cache goes."""
        if event.name == "user.authorization.revoke" and not event.is_test:
            self.invalidate_cache()


def build_oauth_service(
    database: Database, publisher: EventPublisher, clock: Clock, settings: OAuthSettings
) -> OAuthService:
    """The service with the protocol's scope rules and the `[oauth]` settings."""
    rules = ScopeRules(
        scope_catalogue.effective_scopes,
        scope_catalogue.format_scope,
        scope_catalogue.SENSITIVE_SCOPES,
        pkce.verify,
    )
    policy = OAuthPolicy(
        access_ttl=settings.access_token_ttl_seconds,
        refresh_ttl=settings.refresh_token_ttl_seconds,
        code_ttl=settings.code_ttl_seconds,
        need_review=settings.sensitive_scopes_need_review,
        cache_seconds=settings.grant_cache_seconds,
    )
    service = OAuthService(database, publisher, clock, rules, policy)
    publisher.bus.subscribe(service.on_event)
    return service
