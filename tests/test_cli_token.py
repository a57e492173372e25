"""`volthub token`: a token pair for local development, recorded as a grant the user sees and
revokes; it works on the routes its scopes allow and nowhere else (both backends)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import trio

from tests.conftest import make_settings, register_live, serve_app
from volthub.cli import main

WAIT = 10.0


async def _cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = await trio.to_thread.run_sync(main, list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_token_works_where_its_scopes_allow_and_is_revocable(
    database_url: str, nursery: trio.Nursery, capsys: Any
) -> None:
    stop = trio.Event()
    server = await serve_app(nursery, make_settings(database_url, events={"gateway_port": 0}), stop)
    owner = await register_live(server.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
        created = await http.post(
            "/api/developer/apps", json={"name": "token app", "redirectUris": []}, headers=owner.headers
        )
        assert created.status_code == 201, created.text
        client_id = created.json()["clientId"]

        code, out, err = await _cli(
            capsys,
            "token",
            "--database",
            database_url,
            "--user",
            owner.username,
            "--client-id",
            client_id,
            "--scopes",
            "user:write chat:read",
        )
        assert code == 0, err
        pair = orjson.loads(out)
        assert set(pair) == {"access_token", "refresh_token", "expires_in", "scope"}
        assert pair["scope"] == "chat:read user:write" and pair["expires_in"] > 0 and pair["refresh_token"]
        bearer = {"Authorization": f"Bearer {pair['access_token']}"}

        # Allowed: user:write. Not allowed: chat:write, and first-party-only routes.
        allowed = await http.put("/api/users/me", json={"bio": "minted"}, headers=bearer)
        assert allowed.status_code == 200, allowed.text
        chat = await http.post(
            f"/api/integrations/oauth/chat/channels/{owner.id}/messages", json={"message": "hi"}, headers=bearer
        )
        assert chat.status_code == 403
        assert (await http.get("/api/developer/apps", headers=bearer)).status_code == 403

        # The user sees the grant, like one given on the consent screen, and revokes it.
        listed = (await http.get("/api/users/me/connections", headers=owner.headers)).json()
        [connection] = [c for c in listed["items"] if c["clientId"] == client_id]
        assert set(connection["scopes"]) == {"chat:read", "user:write"}
        revoked = await http.delete(f"/api/users/me/connections/{client_id}", headers=owner.headers)
        assert revoked.status_code in (200, 204), revoked.text
        after = await http.put("/api/users/me", json={"bio": "again"}, headers=bearer)
        assert after.status_code == 401

        # Sensitive scopes: refused until the operator grants them to the app.
        argv = ["token", "--database", database_url, "--user", owner.username, "--client-id", client_id]
        code, out, err = await _cli(capsys, *argv, "--scopes", "chat:moderate")
        assert code == 1 and "invalid_scope" in err and "chat:moderate" in err and out == ""
        code, _, err = await _cli(capsys, "apps", "grant", "--database", database_url, client_id, "chat:moderate")
        assert code == 0, err
        code, out, err = await _cli(capsys, *argv, "--scopes", "chat:moderate")
        assert code == 0, err
        assert orjson.loads(out)["scope"] == "chat:moderate"

        # First-party: a session token, as sign-in gives (first-party routes work).
        code, out, err = await _cli(
            capsys, "token", "--database", database_url, "--user", owner.username, "--first-party"
        )
        assert code == 0, err
        session = orjson.loads(out)
        apps = await http.get("/api/developer/apps", headers={"Authorization": f"Bearer {session['access_token']}"})
        assert apps.status_code == 200
    stop.set()


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--user", "x", "--client-id", "c", "--scopes", "nope"], "unknown scope"),
        (["--user", "x", "--first-party", "--scopes", "chat:read"], "--client-id"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], problem: str, capsys: Any) -> None:
    assert main(["token", *argv]) == 2
    assert problem in capsys.readouterr().err


def test_unknown_user_or_app_exit_1(tmp_path: Any, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["token", "--database", url, "--user", "nobody", "--client-id", "app_x"]) == 1
    assert "no user named" in capsys.readouterr().err
    assert main(["token", "--database", url, "--user", "nobody", "--first-party"]) == 1
