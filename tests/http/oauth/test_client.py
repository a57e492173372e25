"""A real OAuth client library (Authlib's httpx-based AsyncOAuth2Client, under Trio) against a
live server: authorization code + PKCE S256, an API call, refresh, and reuse detection."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata

REDIRECT = "http://127.0.0.1:8765/callback"


async def _account(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    response = await http.post("/api/auth/register", json={"username": name, "password": "correct horse battery"})
    assert response.status_code == 201, response.text
    return response.json()


async def _developer_app(http: httpx.AsyncClient, token: str, **body: Any) -> dict[str, Any]:
    response = await http.post(
        "/api/developer/apps",
        json={"name": "Authlib app", "redirectUris": [REDIRECT], **body},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.text
    return response.json()


async def _consent(http: httpx.AsyncClient, token: str, authorization_url: str) -> str:
    """The consenting user approves through the JSON API; returns the callback URL."""
    params = {k: v[0] for k, v in parse_qs(urlsplit(authorization_url).query).items()}
    response = await http.post(
        "/api/developer/oauth/authorize", json={**params, "approve": True}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    return response.json()["redirectUrl"]


async def _authorize(client: AsyncOAuth2Client, http: httpx.AsyncClient, token: str, base: str) -> Any:
    """The code flow with PKCE S256, the user of `token` consenting; the client's tokens."""
    verifier = generate_token(64)
    url, state = client.create_authorization_url(f"{base}/oauth/authorize", code_verifier=verifier)
    assert "code_challenge=" in url and "code_challenge_method=S256" in url
    callback = await _consent(http, token, url)
    return await client.fetch_token(
        f"{base}/api/developer/oauth/token", authorization_response=callback, code_verifier=verifier, state=state
    )


@pytest.mark.parametrize("auth_method", ["client_secret_basic", "client_secret_post"])
async def test_authlib_code_flow_with_pkce_refresh_and_reuse(live_server, auth_method):
    base = live_server.url
    async with httpx.AsyncClient(base_url=base) as http:
        owner = await _account(http, f"owner_{auth_method[-4:]}")
        user = await _account(http, f"viewer_{auth_method[-4:]}")
        app = await _developer_app(http, owner["token"])

        async with AsyncOAuth2Client(
            client_id=app["clientId"],
            client_secret=app["clientSecret"],
            scope="chat:read user:write",
            redirect_uri=REDIRECT,
            code_challenge_method="S256",
            token_endpoint_auth_method=auth_method,
        ) as client:
            token = await _authorize(client, http, user["token"], base)
            assert token["token_type"] == "Bearer" and token["scope"] == "chat:read user:write"
            me = await client.get(f"{base}/api/users/me")
            assert me.status_code == 200 and me.json()["id"] == user["user"]["id"]

            first_refresh = token["refresh_token"]
            renewed = await client.refresh_token(f"{base}/api/developer/oauth/token")
            assert renewed["refresh_token"] != first_refresh and renewed["access_token"] != token["access_token"]
            assert (await client.get(f"{base}/api/users/me")).status_code == 200

            with pytest.raises(OAuthError) as refused:
                await client.refresh_token(f"{base}/api/developer/oauth/token", refresh_token=first_refresh)
            assert refused.value.error == "invalid_grant"
            # The reuse revoked the whole grant: the current access token stops working too.
            assert (await client.get(f"{base}/api/users/me")).status_code == 401


async def test_authlib_public_client_and_revocation(live_server):
    base = live_server.url
    async with httpx.AsyncClient(base_url=base) as http:
        owner = await _account(http, "owner_public")
        user = await _account(http, "viewer_public")
        app = await _developer_app(http, owner["token"], public=True)
        assert app["clientSecret"] is None

        async with AsyncOAuth2Client(
            client_id=app["clientId"],
            scope="chat:read",
            redirect_uri=REDIRECT,
            code_challenge_method="S256",
            token_endpoint_auth_method="none",
        ) as client:
            token = await _authorize(client, http, user["token"], base)
            assert (await client.get(f"{base}/api/users/me")).status_code == 200
            revoked = await client.revoke_token(
                f"{base}/api/developer/oauth/revoke", token=token["refresh_token"], token_type_hint="refresh_token"
            )
            assert revoked.status_code == 200
            assert (await client.get(f"{base}/api/users/me")).status_code == 401


async def test_metadata_passes_authlibs_rfc8414_validation(live_server):
    async with httpx.AsyncClient(base_url=live_server.url) as http:
        document = (await http.get("/.well-known/oauth-authorization-server")).json()
    metadata = AuthorizationServerMetadata(document)
    metadata.validate()
    settings = live_server.app.extensions["volthub"].settings.server
    assert metadata["issuer"] == f"http://{settings.host}:{settings.port}"  # never from Host
    assert "S256" in metadata["code_challenge_methods_supported"]
