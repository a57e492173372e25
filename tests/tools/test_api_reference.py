"""The API reference page of the docs site is written from the OpenAPI document the code builds."""

from __future__ import annotations

from volthub.tools.api_reference import METHODS, openapi_document, render


def test_the_reference_lists_every_operation_of_the_document_with_its_access() -> None:
    document = openapi_document()
    page = render(document)
    operations = [(method, path) for path, item in document["paths"].items() for method in METHODS if method in item]
    missing = [
        f"{method.upper()} {path}" for method, path in operations if f"### `{method.upper()} {path}`" not in page
    ]
    assert operations and not missing, missing
    poll = page.split("### `POST /api/integrations/oauth/polls`", 1)[1].split("### ", 1)[0]
    assert "Access: token with `channel:interactive:write`." in poll
    assert "| `durationSeconds` | integer | yes | ≥ 15, ≤ 1800" in poll
