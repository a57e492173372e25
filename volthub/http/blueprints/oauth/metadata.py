"""What a client discovers: the scope catalogue and the authorization server metadata (RFC 8414)."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from quart import jsonify
from quart_schema import document_response, tag

from volthub.http import access
from volthub.http.blueprints.oauth.common import blueprint
from volthub.http.blueprints.oauth.token_endpoint import GRANT_TYPES
from volthub.http.openapi import responds
from volthub.http.runtime import runtime
from volthub.http.schemas import Model
from volthub.protocol.oauth.scopes import SCOPE_NAMES, catalogue_document

# --- catalogue and metadata --------------------------------------------------------------------------


class ScopeInfo(Model):
    name: str
    category: str
    description: str
    sensitive: bool


class ScopeCatalogue(Model):
    example = {
        "scopes": [
            {
                "name": "Speedrun Club",
                "category": "Just Chatting",
                "description": "Speedruns and chill every Friday.",
                "sensitive": False,
            }
        ],
        "aliases": {},
    }

    scopes: list[ScopeInfo]
    aliases: dict[str, str | None] = Field(
        description="legacy scope string -> the real scope it grants (null: nothing extra)"
    )


@blueprint.get("/api/developer/oauth/scopes")
@access.public
@tag(["OAuth"])
@document_response(ScopeCatalogue)
async def scopes() -> Any:
    """Every scope an app can request, with category, description and sensitivity.

    Legacy aliases are accepted on authorize and in stored tokens.
    """
    return jsonify(catalogue_document())


def issuer() -> str:
    """`[server] public_url`; without it, the address the server is configured to bind.
    Never the request's Host header (RFC 9700 §4.4: a client would choose the issuer)."""
    server = runtime().settings.server
    if server.public_url:
        return server.public_url.rstrip("/")
    host = f"[{server.host}]" if ":" in server.host else server.host
    return f"http://{host}:{server.port}"


_URL = {"type": "string", "format": "uri"}
_WORDS = {"type": "array", "items": {"type": "string"}}
METADATA_SCHEMA = {
    "type": "object",
    "required": ["issuer", "authorization_endpoint", "token_endpoint", "response_types_supported"],
    "properties": {
        "issuer": _URL,
        "authorization_endpoint": _URL,
        "token_endpoint": _URL,
        "revocation_endpoint": _URL,
        "scopes_supported": _WORDS,
        "response_types_supported": _WORDS,
        "response_modes_supported": _WORDS,
        "grant_types_supported": _WORDS,
        "token_endpoint_auth_methods_supported": _WORDS,
        "revocation_endpoint_auth_methods_supported": _WORDS,
        "code_challenge_methods_supported": _WORDS,
        "service_documentation": _URL,
    },
}
_BASE = "https://volthub.example"
METADATA_EXAMPLE = {
    "issuer": _BASE,
    "authorization_endpoint": f"{_BASE}/oauth/authorize",
    "token_endpoint": f"{_BASE}/api/developer/oauth/token",
    "revocation_endpoint": f"{_BASE}/api/developer/oauth/revoke",
    "scopes_supported": ["chat:read", "chat:write"],
    "response_types_supported": ["code"],
    "response_modes_supported": ["query"],
    "grant_types_supported": ["authorization_code", "refresh_token"],
    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
    "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
    "code_challenge_methods_supported": ["S256"],
    "service_documentation": f"{_BASE}/api/openapi.json",
}


@blueprint.get("/.well-known/oauth-authorization-server")
@access.public
@tag(["OAuth"])
@responds(
    200, "Authorization server metadata (RFC 8414)", "application/json", METADATA_SCHEMA, example=METADATA_EXAMPLE
)
async def metadata() -> Any:
    """Authorization server metadata (RFC 8414). The issuer is `[server] public_url` (or,
    when that is empty, the configured bind address), never the request's Host header."""
    base = issuer()
    methods = ["S256", "plain"] if runtime().settings.oauth.allow_plain_pkce else ["S256"]
    auth_methods = ["client_secret_basic", "client_secret_post", "none"]
    return jsonify(
        {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/api/developer/oauth/token",
            "revocation_endpoint": f"{base}/api/developer/oauth/revoke",
            "scopes_supported": list(SCOPE_NAMES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": list(GRANT_TYPES),
            "token_endpoint_auth_methods_supported": auth_methods,
            "revocation_endpoint_auth_methods_supported": auth_methods,
            "code_challenge_methods_supported": methods,
            "service_documentation": f"{base}/api/openapi.json",
        }
    )
