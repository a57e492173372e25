"""Every operation of the document is described and shows what it takes and gives: a
one-sentence summary and a description, a description on every response, a schema and an
example for every JSON request body and every JSON 2xx answer, each example valid against
its schema, and every tag described. A new route that leaves one out fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.openapi_support import fetch_served_document, strict_json

METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture(scope="module")
def document(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    loaded: dict[str, Any] = strict_json(fetch_served_document(sqlite_template, tmp_path_factory.mktemp("openapi")))
    return loaded


def _operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def _json_bodies(operation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The JSON request body and JSON 2xx answers: what a client sends and reads back."""
    found = []
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        found.append(("request body", body))
    for status, response in operation["responses"].items():
        answer = response.get("content", {}).get("application/json")
        if status.startswith("2") and answer is not None:
            found.append((f"{status} answer", answer))
    return found


def test_every_operation_has_a_one_sentence_summary_and_a_description(document: dict[str, Any]) -> None:
    missing = []
    for name, operation in _operations(document):
        summary, description = operation.get("summary", ""), operation.get("description", "")
        if not summary or not description:
            missing.append(f"{name}: no docstring")
        elif "\n" in summary or not " ".join(description.split()).startswith(summary):
            missing.append(f"{name}: summary {summary!r} is not the description's first sentence")
    assert missing == []


def test_every_response_is_described(document: dict[str, Any]) -> None:
    undescribed = [
        f"{name} {status}"
        for name, operation in _operations(document)
        for status, response in operation["responses"].items()
        if not response.get("description", "").strip()
    ]
    assert undescribed == []


def test_every_json_body_has_a_schema_and_an_example(document: dict[str, Any]) -> None:
    missing = [
        f"{name} {what}"
        for name, operation in _operations(document)
        for what, media in _json_bodies(operation)
        if not media.get("schema") or "example" not in media
    ]
    assert missing == []


def test_every_example_is_valid_against_its_schema(document: dict[str, Any]) -> None:
    registry = Registry().with_resource("urn:openapi", Resource(contents=document, specification=DRAFT202012))
    invalid = []
    for name, operation in _operations(document):
        for what, media in _json_bodies(operation):
            if "example" not in media:
                continue
            schema = {**_with_document_refs(media["schema"]), "$schema": "https://json-schema.org/draft/2020-12/schema"}
            validator = Draft202012Validator(schema, registry=registry)
            invalid += [f"{name} {what}: {error.message}" for error in validator.iter_errors(media["example"])]
    assert invalid == []


def test_an_invalid_example_is_caught(document: dict[str, Any]) -> None:
    registry = Registry().with_resource("urn:openapi", Resource(contents=document, specification=DRAFT202012))
    validator = Draft202012Validator(_with_document_refs({"$ref": "#/components/schemas/Error"}), registry=registry)
    assert not validator.is_valid({"error": "validation_error"})  # no message


def test_every_tag_is_described(document: dict[str, Any]) -> None:
    described = {tag["name"] for tag in document["tags"] if tag.get("description")}
    used = {tag for _, operation in _operations(document) for tag in operation.get("tags", [])}
    assert used - described == set()


def _with_document_refs(schema: Any) -> Any:
    """`#/components/...` points into the document, which the registry holds as urn:openapi."""
    if isinstance(schema, dict):
        return {
            key: (f"urn:openapi{value}" if key == "$ref" and value.startswith("#") else _with_document_refs(value))
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_with_document_refs(value) for value in schema]
    return schema
