"""A user's connected apps: the apps they authorised, and disconnecting one."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from quart import Response, jsonify
from quart_schema import document_response, tag

from volthub.http import access
from volthub.http.blueprints.oauth.common import blueprint, oauth_service
from volthub.http.errors import not_found
from volthub.http.schemas import Model
from volthub.hub.clock import iso8601
from volthub.protocol.oauth.client_auth import plausible_client_id
from volthub.protocol.oauth.scopes import format_scope
from volthub.services.oauth import Connection

# --- a user's connected apps ---------------------------------------------------------------------------


class ConnectionOut(Model):
    clientId: str
    name: str
    description: str
    logoUrl: str | None
    reviewed: bool
    scopes: list[str] = Field(description="real scopes the app holds now, in catalogue order")
    connectedAt: str
    updatedAt: str


class ConnectionList(Model):
    example = {
        "items": [
            {
                "clientId": "0b7e2a4c-5d1f-4e8a-9c3b-ea1ce9be0000",
                "name": "Speedrun Club",
                "description": "Speedruns and chill every Friday.",
                "logoUrl": "https://volthub.example/logoUrl",
                "reviewed": False,
                "scopes": ["chat:read chat:write"],
                "connectedAt": "2026-03-14T18:30:00Z",
                "updatedAt": "2026-03-14T18:30:00Z",
            }
        ]
    }

    items: list[ConnectionOut]


@blueprint.get("/api/users/me/connections")
@access.first_party
@tag(["OAuth"])
@document_response(ConnectionList)
async def connections() -> Any:
    """Apps the signed-in user has authorised (with at least one active grant)."""
    found = await oauth_service().connections(access.principal().user_id)
    items = [_connection_out(connection) for connection in found]
    return jsonify(ConnectionList(items=items).model_dump())


def _connection_out(connection: Connection) -> ConnectionOut:
    return ConnectionOut.from_record(
        connection.app,
        scopes=format_scope(connection.held).split(),
        connectedAt=iso8601(connection.connected_at),
        updatedAt=iso8601(connection.updated_at),
    )


@blueprint.delete("/api/users/me/connections/<client_id>")
@access.first_party
@tag(["OAuth"])
async def disconnect(client_id: str) -> Any:
    """Revoke every grant the signed-in user gave this app; its tokens stop working at once.
    Publishes `user.authorization.revoke`. 404 when the user has no active grant for it."""
    found = plausible_client_id(client_id) and await oauth_service().revoke_connection(
        access.principal().user_id, client_id
    )
    if not found:
        raise not_found("connection", clientId=client_id)
    return Response("", status=204)
