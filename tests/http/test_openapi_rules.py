"""The answers added by rule to every operation (volthub/http/openapi.py): a route written
without listing them still comes out right in /api/openapi.json."""

from __future__ import annotations

from typing import Any

import pytest
from quart import Blueprint
from quart_schema import tag

from tests.conftest import make_settings
from volthub.http import access


async def test_a_new_route_gets_its_answers_by_rule(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    app = create_app(make_settings(sqlite_url))
    extra = Blueprint("rules_probe", __name__, url_prefix="/api/probe")

    @extra.post("/<poll_id>/vote/<client_id>")
    @access.token("chat:write")
    @tag(["Probe"])
    async def vote(poll_id: str, client_id: str) -> Any:
        return {}

    @extra.delete("/<poll_id>")
    @access.token("chat:write")
    async def remove(poll_id: str) -> Any:
        return "", 204

    app.register_blueprint(extra)
    async with app.test_app():
        document = await (await app.test_client().get("/api/openapi.json")).get_json()
    post = document["paths"]["/api/probe/{poll_id}/vote/{client_id}"]["post"]
    assert {"400", "401", "403", "404", "413", "415", "429", "503"} <= set(map(str, post["responses"]))
    formats = {param["name"]: param["schema"].get("format") for param in post["parameters"] if param["in"] == "path"}
    assert formats == {"poll_id": "uuid", "client_id": None}
    assert post["responses"]["503"]["headers"]["Retry-After"]
    delete = document["paths"]["/api/probe/{poll_id}"]["delete"]
    assert "204" in map(str, delete["responses"])


async def test_html_and_stream_routes_document_their_content_types(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    app = create_app(make_settings(sqlite_url))
    async with app.test_app():
        document = await (await app.test_client().get("/api/openapi.json")).get_json()
    page = document["paths"]["/oauth/authorize"]["get"]["responses"]
    assert list(page["200"]["content"]) == ["text/html"]
    assert list(page["400"]["content"]) == ["text/html"]
    stream = document["paths"]["/api/events/stream"]["get"]["responses"]
    assert list(stream["200"]["content"]) == ["text/event-stream"]
    assert "409" in document["paths"]["/api/auth/register"]["post"]["responses"]
    assert "401" in document["paths"]["/api/auth/login"]["post"]["responses"]


async def test_two_models_with_one_name_are_refused(sqlite_url: str) -> None:
    """Two answers' models named alike would share one component and one would silently
    describe the other's body: the document refuses to build."""
    from quart_schema import validate_response

    from volthub.http.app import create_app
    from volthub.http.openapi import ComponentNameClash
    from volthub.http.schemas import Model

    class UserOut(Model):  # a second UserOut beside volthub.http.schemas.UserOut
        nickname: str

    app = create_app(make_settings(sqlite_url))
    extra = Blueprint("clash_probe", __name__, url_prefix="/api/clash")

    @extra.get("/")
    @access.public
    @validate_response(UserOut)
    async def clash() -> Any:
        """A probe."""
        return UserOut(nickname="x")

    app.register_blueprint(extra)
    async with app.app_context():
        with pytest.raises(ComponentNameClash, match="UserOut"):
            app.extensions["QUART_SCHEMA"].openapi_provider.schema()
