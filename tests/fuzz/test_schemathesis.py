"""schemathesis over the whole OpenAPI document, on both backends, with a
first-party token and an OAuth token holding every scope.

Checks: not_a_server_error, status_code_conformance, content_type_conformance,
response_schema_conformance. `make test` runs a few derandomized examples per operation
(reproducible in CI), each operation on one backend: the operations are dealt out between
SQLite and PostgreSQL by a stable hash of "METHOD path", so both backends see about half of
them and the HTTP contract is checked once per operation. `make fuzz` sets
VOLTHUB_FUZZ_EXAMPLES for a longer run and VOLTHUB_FUZZ_EVERY_BACKEND=1, which fuzzes every
operation on both backends.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.transport.requests import ManagedCookiesSession

from tests.conftest import POSTGRES, ROOMY_LIMITS, ServerProcess

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("VOLTHUB_FUZZ_EXAMPLES", "6"))
EVERY_BACKEND = os.environ.get("VOLTHUB_FUZZ_EVERY_BACKEND", "") not in ("", "0")
BACKENDS = ["sqlite", "postgres"]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Room for every fuzzed request; the limiter itself is covered by tests/http/test_ratelimit*.
ROOMY = {f"VOLTHUB_RATELIMIT__{key.upper()}": str(budget) for key, budget in ROOMY_LIMITS.items()}


def _postgres_schema_url() -> Iterator[str]:
    import psycopg

    schema = f"fuzz_{secrets.token_hex(5)}"
    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{POSTGRES}?options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="module", params=BACKENDS)
def fuzz_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    env = {
        **ROOMY,
        "VOLTHUB_OAUTH__SENSITIVE_SCOPES_NEED_REVIEW": "false",
        "VOLTHUB_SERVER__PUBLIC_URL": "http://127.0.0.1",
        "VOLTHUB_AUTH__FAILED_LOGINS_PER_ACCOUNT": "1000000",
        "VOLTHUB_AUTH__FAILED_LOGINS_PER_ADDRESS": "1000000",
        "VOLTHUB_AUTH__CONCURRENT_LOGINS_PER_ADDRESS": "1000",
    }
    if request.param == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{tmp / 'fuzz.db'}"])
    else:
        request.getfixturevalue("postgres_server")
        urls = _postgres_schema_url()
    url = next(urls)
    server = ServerProcess(url, tmp, env).start()
    try:
        yield server
    finally:
        server.kill()
        for _ in urls:  # drop the PostgreSQL schema
            pass


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


@pytest.fixture(scope="module")
def tokens(fuzz_server: ServerProcess) -> dict[str, str]:
    """A first-party token and an OAuth access token holding every scope."""
    with httpx.Client(base_url=fuzz_server.url, timeout=30) as http:
        name = f"fuzz_{secrets.token_hex(4)}"
        registered = http.post("/api/auth/register", json={"username": name, "password": "correct horse battery"})
        first_party = registered.json()["token"]
        auth = {"Authorization": f"Bearer {first_party}"}
        redirect = "https://fuzz.example/callback"
        created = http.post("/api/developer/apps", json={"name": "fuzz app", "redirectUris": [redirect]}, headers=auth)
        assert created.status_code == 201, created.text
        client_id, client_secret = created.json()["clientId"], created.json()["clientSecret"]
        scopes = " ".join(item["name"] for item in http.get("/api/developer/oauth/scopes").json()["scopes"])
        verifier, challenge = _pkce()
        consent = http.post(
            "/api/developer/oauth/authorize",
            json={
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect,
                "scope": scopes,
                "state": "fuzz",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "approve": True,
            },
            headers=auth,
        )
        assert consent.status_code == 200, consent.text
        token = http.post(
            "/api/developer/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": consent.json()["code"],
                "redirect_uri": redirect,
                "client_id": client_id,
                "client_secret": client_secret,
                "code_verifier": verifier,
            },
        )
        assert token.status_code == 200, token.text
    return {"first_party": first_party, "oauth": token.json()["access_token"]}


def backend_of(method: str, path: str) -> str:
    """The backend that fuzzes this operation when each operation runs on one backend."""
    return BACKENDS[zlib.crc32(f"{method.upper()} {path}".encode()) % len(BACKENDS)]


# The backend of the server the module's tests run against now. schemathesis drops the
# filters of the fixture's own schema (the lazy schema's filters replace them), so the
# filter below reads which backend is up from here; the fuzz_server instances run one after
# the other (module scope).
_serving: dict[str, str] = {}


@pytest.fixture(scope="module")
def api_schema(fuzz_server: ServerProcess) -> Any:
    _serving["backend"] = "postgres" if fuzz_server.database_url.startswith("postgresql") else "sqlite"
    return schemathesis.openapi.from_url(f"{fuzz_server.url}/api/openapi.json")


def _dealt_here(ctx: Any) -> bool:
    return EVERY_BACKEND or backend_of(ctx.operation.method, ctx.operation.path) == _serving["backend"]


schema = schemathesis.pytest.from_fixture("api_schema").include(_dealt_here)


@pytest.fixture(scope="module")
def http_session(fuzz_server: ServerProcess) -> Iterator[ManagedCookiesSession]:
    """One keep-alive session for the module's requests (schemathesis opens a session, and a
    connection, per request otherwise). schemathesis drops its cookies after each request;
    no proxy settings from the environment (looking them up cost ~1 ms a request)."""
    session = ManagedCookiesSession()
    session.trust_env = False
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    """schemathesis 4's lazy schema reads `node._nodeid`, which pytest 9 no longer has."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms(
    case: Any, fuzz_server: ServerProcess, tokens: dict[str, str], http_session: ManagedCookiesSession
) -> None:
    if case.path == "/api/events/stream":  # endless by design; covered by tests/http/events
        return
    for token in tokens.values():
        case.call_and_validate(
            base_url=fuzz_server.url,
            session=http_session,
            headers={"Authorization": f"Bearer {token}"},
            checks=CHECKS,
            timeout=30,
        )
