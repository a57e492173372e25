"""The ecosystem's OpenAPI tools accept the served document: strict JSON, Redocly's
recommended rules, Spectral's `spectral:oas`, and a TypeScript client typed by
openapi-typescript that `tsc --strict` compiles."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.openapi_support import CONTRACT_DIR, contract_tool, fetch_served_document, run_tool, strict_json

# Node and generator subprocesses for minutes: scheduled among the slow modules.
pytestmark = pytest.mark.slow

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def served_document(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    scratch = tmp_path_factory.mktemp("openapi")
    path = scratch / "openapi.json"
    path.write_bytes(fetch_served_document(sqlite_template, scratch))
    return path


def _responses(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        operation["responses"]
        for item in document["paths"].values()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_served_document_has_no_repeated_keys_and_string_status_codes(served_document: Path) -> None:
    document = strict_json(served_document.read_bytes())  # raises on a repeated key
    for responses in _responses(document):
        assert all(isinstance(status, str) and status.isdigit() for status in responses)


def test_a_repeated_key_is_detected() -> None:
    with pytest.raises(ValueError, match="duplicate key '404'"):
        strict_json(b'{"responses": {"404": {}, "404": {"description": "x"}}}')


def test_every_error_response_references_the_one_error_component(served_document: Path) -> None:
    document = strict_json(served_document.read_bytes())
    error = document["components"]["schemas"]["Error"]
    assert error["properties"]["details"]["additionalProperties"] is True
    assert {"field", "requestId", "retry_after", "waitSeconds", "status"} <= set(
        error["properties"]["details"]["properties"]
    )
    for responses in _responses(document):
        for status, response in responses.items():
            json_body = response.get("content", {}).get("application/json")
            if status >= "400" and json_body is not None:
                assert json_body["schema"] == {"$ref": "#/components/schemas/Error"}, status


def test_redocly_recommended_rules_find_nothing(served_document: Path) -> None:
    redocly = contract_tool("redocly")
    result = run_tool(
        redocly, "lint", "--config", CONTRACT_DIR / "redocly.yaml", "--format", "stylish", served_document
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " warning " not in result.stdout and " error " not in result.stdout, result.stdout


def test_spectral_oas_rules_find_nothing(served_document: Path) -> None:
    spectral = contract_tool("spectral")
    result = run_tool(
        spectral, "lint", "--ruleset", CONTRACT_DIR / ".spectral.yaml", "--fail-severity", "hint", served_document
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No results" in result.stdout, result.stdout


def test_typescript_client_typed_from_the_document_compiles_strict(served_document: Path, tmp_path: Path) -> None:
    generate, tsc = contract_tool("openapi-typescript"), contract_tool("tsc")
    # Fields with a default may be left out of a request body.
    made = run_tool(generate, served_document, "--default-non-nullable", "false", "-o", tmp_path / "api.d.ts")
    assert made.returncode == 0, made.stdout + made.stderr
    shutil.copyfile(CONTRACT_DIR / "typed_client.ts", tmp_path / "typed_client.ts")
    compiled = run_tool(
        tsc,
        "--strict",
        "--noEmit",
        "--target",
        "es2022",
        "--module",
        "es2022",
        "--moduleResolution",
        "bundler",
        "--lib",
        "es2022,dom",
        tmp_path / "typed_client.ts",
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
