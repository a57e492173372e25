"""The OpenAPI document describes every registered route, with its access."""

import re

from volthub.http.access import declaration_of

SKIP_ENDPOINTS = {"openapi", "asyncapi.asyncapi_document", "devpages.static_file"}
# The developer dashboard's pages and forms are for people in a browser (its guide,
# docs/guides/developer-tools.md, describes them); they are not API operations.
SKIP_BLUEPRINTS = {"developer"}


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[a-z_]+:)?([a-zA-Z_]+)>", r"{\1}", rule)


async def test_every_route_is_documented(app, client):
    document = await (await client.get("/api/openapi.json")).get_json()
    assert document["openapi"].startswith("3.1")
    missing = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint in SKIP_ENDPOINTS or rule.endpoint.split(".")[0] in SKIP_BLUEPRINTS or rule.websocket:
            continue
        path = _openapi_path(rule.rule)
        operations = document["paths"].get(path, {})
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            if method.lower() not in operations:
                missing.append(f"{method} {rule.rule}")
    assert missing == []


async def test_every_route_has_an_access_declaration(app):
    undeclared = [
        rule.rule for rule in app.url_map.iter_rules() if declaration_of(app.view_functions[rule.endpoint]) is None
    ]
    assert undeclared == []


async def test_documented_access_matches_declarations(app, client):
    document = await (await client.get("/api/openapi.json")).get_json()
    put_me = document["paths"]["/api/users/me"]["put"]
    assert put_me["x-access"] == "token" and put_me["x-required-scope"] == "user:write"
    assert put_me["security"] == [{"bearer": []}]
    register = document["paths"]["/api/auth/register"]["post"]
    assert register["x-access"] == "public" and register["security"] == []
    assert "requestBody" in register and "201" in register["responses"]
    assert "Error" in document["components"]["schemas"]


async def test_rate_limits_are_documented(client):
    document = await (await client.get("/api/openapi.json")).get_json()
    follow = document["paths"]["/api/users/follow/{user_id}"]["post"]
    assert "Retry-After" in follow["responses"]["429"]["headers"]
    assert "X-RateLimit-Remaining" in follow["responses"]["200"]["headers"]


async def test_document_is_valid_openapi_3_1(client):
    from openapi_spec_validator import validate

    document = await (await client.get("/api/openapi.json")).get_json()
    validate(document)  # raises with the first problem it finds
    operation_ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(operation_ids) == len(set(operation_ids))
