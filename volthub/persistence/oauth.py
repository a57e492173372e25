"""OAuth state: operator scope grants per app, user grants, authorization codes, refresh tokens.

Codes and refresh tokens are stored as SHA-256 hex digests of high-entropy random values, so
a copy of the database lets no one redeem them. Scope strings here are plain data: alias
expansion and sensitivity live with the scope catalogue (volthub.protocol.oauth.scopes), and
`held_scope` already holds real scope names only, so this module needs neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from volthub.persistence.database import IntegrityError, Row, Tx
from volthub.persistence.records import Record, insert, read

# --- operator grants of sensitive scopes ----------------------------------------------------


def app_scope_grants(tx: Tx, client_id: str) -> dict[str, int]:
    """Sensitive scopes an operator granted the app -> when (epoch ms)."""
    rows = tx.execute("SELECT scope, granted_at FROM app_scope_grants WHERE client_id = ?", (client_id,))
    return {row["scope"]: int(row["granted_at"]) for row in rows}


def grant_app_scope(tx: Tx, client_id: str, scope: str, now_ms: int) -> bool:
    """True when newly granted; granting twice keeps the first time."""
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO app_scope_grants (client_id, scope, granted_at) VALUES (?, ?, ?)",
                (client_id, scope, now_ms),
            )
    except IntegrityError:
        return False
    return True


def revoke_app_scope(tx: Tx, client_id: str, scope: str, now_ms: int) -> tuple[bool, int]:
    """Withdraw an operator grant and take `scope` out of every active grant of the app at once.

    Returns (was granted, grants narrowed). The users' consent keeps the scope, so a later
    re-grant reaches their grants again at their next refresh.
    """
    removed = bool(
        tx.execute(
            "DELETE FROM app_scope_grants WHERE client_id = ? AND scope = ? RETURNING scope",
            (client_id, scope),
        )
    )
    narrowed = 0
    for grant in _active_grants(tx, "client_id = ?", (client_id,)):
        if scope in grant.held:
            set_held_scope(tx, grant.id, grant.held - {scope}, now_ms)
            narrowed += 1
    return removed, narrowed


# --- grants -------------------------------------------------------------------------------------

_GRANT_COLUMNS = (
    "id, user_id, client_id, consented_scope, held_scope, created_at, updated_at, revoked_at, revoke_reason"
)


@dataclass(frozen=True)
class Grant(Record):
    id: str
    user_id: str
    client_id: str
    consented_scope: str
    held: frozenset[str]
    created_at: int
    updated_at: int
    revoked_at: int | None
    revoke_reason: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def from_row(cls, row: Row) -> Grant:
        return read(cls, row, held=frozenset(row["held_scope"].split()))


def _held_text(held: Iterable[str]) -> str:
    return " ".join(sorted(held))


def create_grant(
    tx: Tx, *, grant_id: str, user_id: str, client_id: str, consented_scope: str, held: Iterable[str], now_ms: int
) -> Grant:
    held_text = _held_text(held)
    tx.execute(
        f"INSERT INTO oauth_grants ({_GRANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
        (grant_id, user_id, client_id, consented_scope, held_text, now_ms, now_ms),
    )
    return Grant(
        grant_id, user_id, client_id, consented_scope, frozenset(held_text.split()), now_ms, now_ms, None, None
    )


def get_grant(tx: Tx, grant_id: str) -> Grant | None:
    return Grant.fetch_one(tx, f"SELECT {_GRANT_COLUMNS} FROM oauth_grants WHERE id = ?", (grant_id,))


def set_held_scope(tx: Tx, grant_id: str, held: Iterable[str], now_ms: int) -> None:
    tx.execute(
        "UPDATE oauth_grants SET held_scope = ?, updated_at = ? WHERE id = ?",
        (_held_text(held), now_ms, grant_id),
    )


def _active_grants(tx: Tx, where: str, params: tuple[str, ...]) -> list[Grant]:
    rows = tx.execute(
        f"SELECT {_GRANT_COLUMNS} FROM oauth_grants WHERE {where} AND revoked_at IS NULL ORDER BY created_at, id",
        params,
    )
    return [Grant.from_row(row) for row in rows]


def active_grants(tx: Tx, user_id: str, client_id: str | None = None) -> list[Grant]:
    """A user's active grants, oldest first; of one app when `client_id` is given."""
    if client_id is None:
        return _active_grants(tx, "user_id = ?", (user_id,))
    return _active_grants(tx, "user_id = ? AND client_id = ?", (user_id, client_id))


def active_grants_of_app(tx: Tx, client_id: str) -> list[Grant]:
    return _active_grants(tx, "client_id = ?", (client_id,))


def revoke_grants(tx: Tx, grant_ids: Iterable[str], now_ms: int, reason: str) -> list[Grant]:
    """Revoke the still-active ones among `grant_ids`; returns those this call revoked."""
    revoked = []
    for grant_id in dict.fromkeys(grant_ids):
        row = tx.one(
            "UPDATE oauth_grants SET revoked_at = ?, revoke_reason = ?, updated_at = ?"
            f" WHERE id = ? AND revoked_at IS NULL RETURNING {_GRANT_COLUMNS}",
            (now_ms, reason, now_ms, grant_id),
        )
        if row is not None:
            revoked.append(Grant.from_row(row))
    return revoked


def grant_has_scope(tx: Tx, user_id: str, client_id: str, scope: str) -> bool:
    """Whether an active grant of `user_id` to `client_id` confers the real scope `scope`.

    `scope` is a real catalogue name (legacy aliases are already expanded in held scopes).
    Used by webhooks to decide whether an app may receive a scope-gated event.
    """
    return any(scope in grant.held for grant in active_grants(tx, user_id, client_id))


# --- authorization codes --------------------------------------------------------------------------


@dataclass(frozen=True)
class AuthorizationCode(Record):
    code_hash: str
    client_id: str
    user_id: str
    redirect_uri: str
    redirect_uri_sent: bool  # RFC 6749 §4.1.3: then the token request must repeat it
    scope: str
    code_challenge: str | None
    code_challenge_method: str | None
    created_at: int
    expires_at: int
    used_at: int | None = None
    grant_id: str | None = None


def insert_code(tx: Tx, code: AuthorizationCode) -> None:
    insert(tx, "oauth_codes", code)


def get_code(tx: Tx, code_hash: str) -> AuthorizationCode | None:
    return AuthorizationCode.fetch_one(
        tx, f"SELECT {AuthorizationCode.columns()} FROM oauth_codes WHERE code_hash = ?", (code_hash,)
    )


def consume_code(tx: Tx, code_hash: str, now_ms: int) -> bool:
    """Mark the code used; False when a concurrent exchange used it first."""
    rows = tx.execute(
        "UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL RETURNING code_hash",
        (now_ms, code_hash),
    )
    return bool(rows)


def attach_grant(tx: Tx, code_hash: str, grant_id: str) -> None:
    """Remember what the code issued, so a replay can revoke it."""
    tx.execute("UPDATE oauth_codes SET grant_id = ? WHERE code_hash = ?", (grant_id, code_hash))


def purge_expired(tx: Tx, codes_before_ms: int, refresh_before_ms: int) -> None:
    """Housekeeping, run on new consents: old codes and expired refresh tokens go."""
    tx.execute("DELETE FROM oauth_codes WHERE expires_at < ?", (codes_before_ms,))
    tx.execute("DELETE FROM oauth_refresh_tokens WHERE expires_at < ?", (refresh_before_ms,))


# --- refresh tokens ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefreshToken(Record):
    token_hash: str
    grant_id: str
    created_at: int
    expires_at: int
    rotated_at: int | None


def insert_refresh_token(tx: Tx, token_hash: str, grant_id: str, now_ms: int, expires_at: int) -> None:
    tx.execute(
        "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at, rotated_at)"
        " VALUES (?, ?, ?, ?, NULL)",
        (token_hash, grant_id, now_ms, expires_at),
    )


def get_refresh_token(tx: Tx, token_hash: str) -> RefreshToken | None:
    return RefreshToken.fetch_one(
        tx,
        "SELECT token_hash, grant_id, created_at, expires_at, rotated_at FROM oauth_refresh_tokens"
        " WHERE token_hash = ?",
        (token_hash,),
    )


def rotate_refresh_token(tx: Tx, token_hash: str, now_ms: int) -> bool:
    """Mark the token used; False when a concurrent refresh already rotated it."""
    rows = tx.execute(
        "UPDATE oauth_refresh_tokens SET rotated_at = ? WHERE token_hash = ? AND rotated_at IS NULL"
        " RETURNING token_hash",
        (now_ms, token_hash),
    )
    return bool(rows)
