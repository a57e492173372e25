"""An OAuth access token backed by a real grant, without the consent flow, and the test app
such a grant is given to."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import create_test_app


async def issue_oauth_token(app: Any, user_id: str, scopes: str | list[str], client_id: str | None = None) -> str:
    """An OAuth access token for `user_id` holding `scopes` (real or legacy names), backed by
    a real grant, so `runtime().services["grant_lookup"]` accepts it and revoking the grant
    ends it. Without `client_id`, a fresh app owned by the user is created; sensitive scopes
    are granted to the app as an operator would (`volthub apps grant`)."""
    import uuid

    from volthub.persistence import oauth as oauth_repo
    from volthub.protocol.oauth.scopes import (
        SENSITIVE_SCOPES,
        effective_scopes,
        format_scope,
    )

    rt = app.extensions["volthub"]
    scope = format_scope(scopes)
    held = effective_scopes(scope)

    def create(tx: Any) -> tuple[str, str]:
        cid = client_id or str(uuid.uuid4())
        if client_id is None:
            create_test_app(tx, cid, user_id)
        for name in held & SENSITIVE_SCOPES:
            oauth_repo.grant_app_scope(tx, cid, name, 1)
        grant = oauth_repo.create_grant(
            tx, grant_id=str(uuid.uuid4()), user_id=user_id, client_id=cid, consented_scope=scope, held=held, now_ms=1
        )
        return cid, grant.id

    cid, grant_id = await rt.db.write(create)
    token, _ = rt.tokens.issue_access(user_id, cid, scope, grant_id, 3600)
    return token


async def oauth_headers(app: Any, user_id: str, scopes: str | list[str]) -> dict[str, str]:
    """The Authorization header of a token from `issue_oauth_token`."""
    return {"Authorization": f"Bearer {await issue_oauth_token(app, user_id, scopes)}"}


async def end_grant(http: httpx.AsyncClient, user: Any, how: str, base_url: str = "") -> None:
    """End the grant behind the user's one connected app: "revoke" it, or "delete app"."""
    [connection] = (await http.get(f"{base_url}/api/users/me/connections", headers=user.headers)).json()["items"]
    client_id = connection["clientId"]
    if how == "revoke":
        gone = await http.delete(f"{base_url}/api/users/me/connections/{client_id}", headers=user.headers)
    else:
        gone = await http.delete(f"{base_url}/api/developer/apps/{client_id}", headers=user.headers)
    assert gone.status_code == 204
