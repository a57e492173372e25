"""An authorization code gives its holder one try: a token request that fails the code's own
checks spends it, on both backends."""

from __future__ import annotations

import pytest

from tests.conftest import make_settings
from tests.http.oauth.flow import DevApp, approve, exchange, new_verifier, owner_user_and_app, token_request
from volthub.config import Settings


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


async def _error(response: object) -> str:
    body = await response.get_json()  # type: ignore[attr-defined]
    assert response.status_code == 400, body  # type: ignore[attr-defined]
    return str(body["error"])


async def test_a_wrong_code_verifier_spends_the_code(client):
    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    code = await approve(client, user, dev, scope="chat:read", verifier=verifier)

    assert await _error(await exchange(client, dev, code, new_verifier())) == "invalid_grant"
    second = await exchange(client, dev, code, verifier)
    assert await _error(second) == "invalid_grant"
    assert "already used" in (await second.get_json())["message"]


async def test_a_failed_client_authentication_leaves_the_code_to_its_client(client):
    owner, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    code = await approve(client, user, dev, scope="chat:read", verifier=verifier)
    impostor = DevApp(dev.client_id, "vhcs_not-the-secret", dev.redirect_uris, owner)
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": new_verifier()}

    refused = await token_request(client, impostor, form, basic=False)
    assert (await refused.get_json())["error"] == "invalid_client"
    assert (await exchange(client, dev, code, verifier)).status_code == 200
