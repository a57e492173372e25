"""Helpers for the OAuth tests: create apps, run the authorize API, call the token endpoint."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.conftest import RegisteredUser, register
from volthub.protocol.oauth.pkce import s256_challenge

REDIRECT = "https://app.example/callback"


@dataclass
class DevApp:
    client_id: str
    client_secret: str | None
    redirect_uris: list[str]
    owner: RegisteredUser

    @property
    def basic(self) -> dict[str, str]:
        raw = f"{self.client_id}:{self.client_secret}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


def new_verifier() -> str:
    return secrets.token_urlsafe(48)


async def create_app(client: Any, owner: RegisteredUser, **body: Any) -> DevApp:
    payload = {"name": "Test app", "redirectUris": [REDIRECT], **body}
    response = await client.post("/api/developer/apps", json=payload, headers=owner.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    created = await response.get_json()
    return DevApp(created["clientId"], created["clientSecret"], created["redirectUris"], owner)


async def owner_user_and_app(client: Any) -> tuple[RegisteredUser, RegisteredUser, DevApp]:
    """The cast of most flows: a developer, a user who will authorize, and the developer's app."""
    owner, user = await register(client), await register(client)
    return owner, user, await create_app(client, owner)


def authorize_params(
    app: DevApp,
    *,
    scope: str = "",
    verifier: str | None = None,
    method: str = "S256",
    state: str = "state-123",
    redirect_uri: str | None = REDIRECT,
) -> dict[str, str]:
    params = {"response_type": "code", "client_id": app.client_id, "scope": scope, "state": state}
    if redirect_uri is not None:
        params["redirect_uri"] = redirect_uri
    if verifier is not None:
        params["code_challenge"] = s256_challenge(verifier) if method == "S256" else verifier
        params["code_challenge_method"] = method
    return params


async def approve(client: Any, user: RegisteredUser, app: DevApp, **kwargs: Any) -> str:
    """Consent through the JSON API; returns the code."""
    body = {**authorize_params(app, **kwargs), "approve": True}
    response = await client.post("/api/developer/oauth/authorize", json=body, headers=user.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    result = await response.get_json()
    query = parse_qs(urlsplit(result["redirectUrl"]).query)
    assert query["code"] == [result["code"]]
    return result["code"]


async def token_request(client: Any, app: DevApp, form: dict[str, str], *, basic: bool = True) -> Any:
    headers = app.basic if basic and app.client_secret else {}
    if not basic or not app.client_secret:
        form = {**form, "client_id": app.client_id}
        if app.client_secret:
            form["client_secret"] = app.client_secret
    return await client.post("/api/developer/oauth/token", form=form, headers=headers)


async def exchange(client: Any, app: DevApp, code: str, verifier: str | None, redirect_uri: str = REDIRECT) -> Any:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri}
    if verifier is not None:
        form["code_verifier"] = verifier
    return await token_request(client, app, form)


async def oauth_tokens(client: Any, user: RegisteredUser, app: DevApp, scope: str = "") -> dict[str, Any]:
    """The whole code + PKCE flow; returns the token response body."""
    verifier = new_verifier()
    code = await approve(client, user, app, scope=scope, verifier=verifier)
    response = await exchange(client, app, code, verifier)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def refresh(client: Any, app: DevApp, refresh_token: str, **extra: str) -> Any:
    return await token_request(client, app, {"grant_type": "refresh_token", "refresh_token": refresh_token, **extra})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def grant_sensitive(app_obj: Any, client_id: str, *scopes: str) -> Any:
    """An operator's grant (what `volthub apps grant` does), straight through the repository."""
    from volthub.persistence import oauth as repo

    def run(tx: Any) -> None:
        for scope in scopes:
            repo.grant_app_scope(tx, client_id, scope, 1)

    return app_obj.extensions["volthub"].db.write(run)
