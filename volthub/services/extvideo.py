"""The external video platform integration (paths `extvideo`).

A provider adapter speaking OAuth 2.0 (authorisation code) and a small JSON API, at the
addresses `[extvideo]` configures; nothing here names a real platform. What the adapter
expects of the provider (the spec shows none of it):

- `GET {authorize_url}?response_type=code&client_id&redirect_uri&scope&state` (and, with
  `[extvideo] pkce`, `code_challenge` and `code_challenge_method=S256`, RFC 7636) — the
  person consents there and comes back to `redirect_uri` with `code` and `state`.
- `POST {token_url}` (form: grant_type=authorization_code|refresh_token, code, redirect_uri,
  code_verifier with PKCE, refresh_token, client_id, client_secret) →
  `{access_token, refresh_token?, expires_in?, scope?}`.

Linking is bound to who started it: `authorize_url` returns, beside the state, a browser
secret the HTTP layer keeps in a cookie of the browser that asked; the callback completes
only with the state (single use, 10 minutes) and that cookie, for the user who asked.
- `POST {revoke_url}` (form: token, client_id, client_secret) — best effort on disconnect.
- `GET {base_url}/me` → `{id, name, url?}`; `GET {base_url}/videos?sort=recent&limit=N`,
  `GET {base_url}/library?limit=N&cursor=C` → `{items: [video], nextCursor?}`;
  `GET {base_url}/playlists?limit=N` → `{items: [playlist]}`; Bearer access token.

An expired access token is refreshed first when a refresh token exists; a provider 401
marks the connection `reauth_required`. Outgoing calls use httpx on Trio with
`[extvideo] timeout_seconds`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import secrets
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from volthub.config import ExtVideoSettings
from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import extvideo as repo
from volthub.persistence.extvideo import Connection
from volthub.services.channels import ChannelNotFound, channel_by_username

__all__ = [
    "ChannelNotFound",
    "Connection",
    "ExtVideo",
    "InvalidState",
    "NotConfigured",
    "NotConnected",
    "ProviderError",
    "ReauthRequired",
    "web_url",
]

STATE_TTL_MS = 10 * 60 * 1000
LIST_MAX = 50


class NotConfigured(Exception):
    pass


class NotConnected(Exception):
    pass


class ReauthRequired(Exception):
    pass


class InvalidState(Exception):
    pass


class ProviderError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def web_url(value: Any) -> str | None:
    """`value` when it is an absolute http(s) address; None for anything else the provider
    sends (javascript:, data:, relative or scheme-relative), so it never reaches a page."""
    if not isinstance(value, str) or len(value) > 2048 or value != value.strip():
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme.lower() in ("http", "https") and parts.hostname else None


def _video(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), (str, int)):
        return None
    return {
        "id": str(item["id"]),
        "title": str(item.get("title") or ""),
        "url": web_url(item.get("url")),
        "thumbnailUrl": web_url(item.get("thumbnailUrl")),
        "publishedAt": item.get("publishedAt") if isinstance(item.get("publishedAt"), str) else None,
        "durationSeconds": item.get("durationSeconds") if isinstance(item.get("durationSeconds"), int) else None,
        "views": item.get("views") if isinstance(item.get("views"), int) else None,
    }


def _playlist(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), (str, int)):
        return None
    count = item.get("videoCount")
    return {
        "id": str(item["id"]),
        "title": str(item.get("title") or ""),
        "url": web_url(item.get("url")),
        "videoCount": count if isinstance(count, int) else None,
    }


def _items(document: Any, shape: Any) -> list[dict[str, Any]]:
    raw = document.get("items") if isinstance(document, dict) else None
    return [found for found in (shape(item) for item in raw or []) if found is not None][:LIST_MAX]


@dataclass(frozen=True)
class Authorization:
    url: str  # the provider's consent address
    state: str
    expires_at: int  # epoch ms
    browser: str  # kept in a cookie of the browser that asked; the callback needs it


@dataclass(frozen=True)
class Status:
    configured: bool
    connection: Connection | None


class ExtVideo:
    def __init__(self, database: Database, clock: Clock, settings: ExtVideoSettings, public_url: str) -> None:
        self._db = database
        self._clock = clock
        self._settings = settings
        base = settings.base_url.rstrip("/")
        self._base = base
        self._authorize = settings.authorize_url or f"{base}/oauth/authorize"
        self._token = settings.token_url or f"{base}/oauth/token"
        self._revoke = settings.revoke_url or f"{base}/oauth/revoke"
        self._redirect = settings.callback_url(public_url)  # absolute: the settings refuse to load otherwise
        # username (lower) -> (fetched at, widget); bounded by the number of connected users.
        self._widgets: dict[str, tuple[float, dict[str, Any]]] = {}

    @property
    def configured(self) -> bool:
        return self._settings.configured

    def _now(self) -> int:
        return to_ms(self._clock.now())

    def _require_configured(self) -> None:
        if not self.configured:
            raise NotConfigured()

    # -- connecting --

    async def authorize_url(self, user_id: str) -> Authorization:
        """The provider's consent URL, its state and the browser secret for the cookie."""
        self._require_configured()
        state, browser = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48) if self._settings.pkce else None
        now = self._now()
        expires = now + STATE_TTL_MS
        await self._db.write(
            lambda tx: repo.add_state(tx, _digest(state), user_id, now, expires, _digest(browser), verifier)
        )
        query = {
            "response_type": "code",
            "client_id": self._settings.client_id,
            "redirect_uri": self._redirect,
            "scope": self._settings.scope,
            "state": state,
        }
        if verifier is not None:
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            query |= {"code_challenge": challenge, "code_challenge_method": "S256"}
        return Authorization(f"{self._authorize}?{urlencode(query)}", state, expires, browser)

    async def complete(self, state: str, code: str, browser: str | None) -> Connection:
        """The provider sent the person back: check the state (single use) belongs to this
        browser, exchange the code, read the account, store it for the user who asked."""
        self._require_configured()
        now = self._now()
        pending = await self._db.write(lambda tx: repo.take_state(tx, _digest(state), now))
        if (
            pending is None
            or pending.browser_hash is None
            or browser is None
            or not hmac.compare_digest(pending.browser_hash, _digest(browser))
        ):
            raise InvalidState()
        user_id = pending.user_id
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": self._redirect}
        if pending.code_verifier is not None:
            form["code_verifier"] = pending.code_verifier
        tokens = await self._token_request(form)
        account = await self._get(tokens["access_token"], "/me", {})
        if not isinstance(account, dict) or not isinstance(account.get("id"), (str, int)):
            raise ProviderError("the provider's /me answer has no account id")
        now = self._now()
        connection = Connection(
            user_id=user_id,
            account_id=str(account["id"]),
            account_name=str(account.get("name") or account["id"]),
            account_url=web_url(account.get("url")),
            access_token=tokens["access_token"],
            refresh_token=tokens.get("refresh_token"),
            expires_at=_expiry(tokens, now),
            scope=str(tokens.get("scope") or self._settings.scope),
            status="connected",
            connected_at=now,
            updated_at=now,
        )
        await self._db.write(lambda tx: repo.save(tx, connection))
        return connection

    async def status(self, user_id: str) -> Status:
        return Status(self.configured, await self._db.read(lambda tx: repo.get(tx, user_id)))

    async def disconnect(self, user_id: str) -> bool:
        found = await self._db.write(lambda tx: repo.delete(tx, user_id))
        if found is None:
            return False
        if self.configured:
            await self._revoke_quietly(found.refresh_token or found.access_token)
        return True

    # -- reading --

    async def recent(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        document = await self._call(user_id, "/videos", {"sort": "recent", "limit": limit})
        return _items(document, _video)

    async def library(self, user_id: str, limit: int, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        document = await self._call(user_id, "/library", params)
        next_cursor = document.get("nextCursor") if isinstance(document, dict) else None
        return _items(document, _video), next_cursor if isinstance(next_cursor, str) else None

    async def playlists(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        return _items(await self._call(user_id, "/playlists", {"limit": limit}), _playlist)

    async def widget(self, username: str) -> dict[str, Any]:
        """A user's public widget: their account and recent videos, or `connected: false`."""
        user = await self._db.read(lambda tx: channel_by_username(tx, username))
        key = user.id
        cached = self._widgets.get(key)
        now = self._clock.now()
        if cached and now - cached[0] < self._settings.widget_cache_seconds:
            return cached[1]
        connection = await self._db.read(lambda tx: repo.get(tx, user.id))
        widget: dict[str, Any] = {"username": user.username, "connected": False, "account": None, "videos": []}
        if connection is not None and connection.status == "connected" and self.configured:
            try:
                videos = await self.recent(user.id, 6)
            except (ProviderError, ReauthRequired, NotConnected):
                videos = None
            if videos is not None:
                widget = {
                    "username": user.username,
                    "connected": True,
                    "account": {
                        "id": connection.account_id,
                        "name": connection.account_name,
                        "url": web_url(connection.account_url),
                    },
                    "videos": videos,
                }
        self._widgets[key] = (now, widget)
        return widget

    # -- the provider --

    async def _call(self, user_id: str, path: str, params: dict[str, Any]) -> Any:
        self._require_configured()
        connection = await self._db.read(lambda tx: repo.get(tx, user_id))
        if connection is None:
            raise NotConnected()
        if connection.status == "reauth_required":
            raise ReauthRequired()
        if connection.expires_at is not None and connection.expires_at <= self._now():
            connection = await self._refresh(connection)
        try:
            return await self._get(connection.access_token, path, params)
        except ProviderError as exc:
            if exc.status != 401:
                raise
        if connection.refresh_token:
            connection = await self._refresh(connection)
            return await self._get(connection.access_token, path, params)
        await self._mark_reauth(user_id)
        raise ReauthRequired()

    async def _mark_reauth(self, user_id: str) -> None:
        now = self._now()
        await self._db.write(lambda tx: repo.mark_reauth(tx, user_id, now))

    async def _refresh(self, connection: Connection) -> Connection:
        if not connection.refresh_token:
            await self._mark_reauth(connection.user_id)
            raise ReauthRequired()
        try:
            tokens = await self._token_request(
                {"grant_type": "refresh_token", "refresh_token": connection.refresh_token}
            )
        except ProviderError as exc:
            if exc.status in (400, 401):
                await self._mark_reauth(connection.user_id)
                raise ReauthRequired() from None
            raise
        now = self._now()
        expires = _expiry(tokens, now)

        def save(tx: Tx) -> None:
            repo.update_tokens(
                tx, connection.user_id, tokens["access_token"], tokens.get("refresh_token"), expires, now
            )

        await self._db.write(save)
        return replace(
            connection,
            access_token=tokens["access_token"],
            refresh_token=tokens.get("refresh_token") or connection.refresh_token,
            expires_at=expires,
        )

    async def _token_request(self, form: dict[str, str]) -> dict[str, Any]:
        body = {**form, "client_id": self._settings.client_id, "client_secret": self._settings.client_secret}
        response = await self._send("POST", self._token, data=body)
        document = _json(response)
        if not isinstance(document, dict) or not isinstance(document.get("access_token"), str):
            raise ProviderError("the provider's token answer has no access_token")
        return document

    async def _get(self, access_token: str, path: str, params: dict[str, Any]) -> Any:
        response = await self._send(
            "GET", f"{self._base}{path}", params=params, headers={"Authorization": f"Bearer {access_token}"}
        )
        return _json(response)

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            async with httpx.AsyncClient(timeout=self._settings.timeout_seconds, follow_redirects=False) as client:
                response = await client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise ProviderError(f"the video platform did not answer: {type(exc).__name__}") from None
        if response.status_code >= 400:
            raise ProviderError(f"the video platform answered {response.status_code}", response.status_code)
        return response

    async def _revoke_quietly(self, token: str) -> None:
        form = {"token": token, "client_id": self._settings.client_id, "client_secret": self._settings.client_secret}
        # The local connection is gone either way; a token the provider keeps expires there.
        with contextlib.suppress(ProviderError):
            await self._send("POST", self._revoke, data=form)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise ProviderError("the video platform answered with something other than JSON") from None


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _expiry(tokens: dict[str, Any], now_ms: int) -> int | None:
    expires_in = tokens.get("expires_in")
    return now_ms + int(expires_in) * 1000 if isinstance(expires_in, (int, float)) and expires_in > 0 else None
