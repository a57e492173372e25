"""`/` (an index) and `/docs` (the API reference, rendered on the server from the OpenAPI
document), with the Quart test client and in headless Chromium with no network but volthub."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.conftest import LiveServer
from tests.http.oauth.test_consent_browser import CHROMIUM, CHROMIUM_ARGS, chromium  # noqa: F401  (fixture)
from volthub.http.docs_page import METHODS, render_docs


async def test_index_answers_json_to_api_clients_and_html_to_browsers(client: Any) -> None:
    response = await client.get("/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    body = await response.get_json()
    assert body["name"] == "volthub" and body["links"]["docs"] == "/docs"
    assert body["links"]["openapi"] == "/api/openapi.json" and body["links"]["developer"] == "/developer"
    page = await client.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 200 and page.content_type.startswith("text/html")
    text = await page.get_data(as_text=True)
    assert 'href="/docs"' in text and 'href="/api/openapi.json"' in text
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]


async def test_docs_render_every_operation_of_the_document(client: Any) -> None:
    document = await (await client.get("/api/openapi.json")).get_json()
    response = await client.get("/docs")
    assert response.status_code == 200 and response.content_type.startswith("text/html")
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp
    text = await response.get_data(as_text=True)
    operations = [(m.upper(), p) for p, ops in document["paths"].items() for m in METHODS if m in ops]
    assert len(operations) > 150
    for method, path in operations:
        assert f'data-method="{method}" data-path="{path}"' in text, (method, path)
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name}"' in text
    assert "<script" not in text and "http://" not in text.replace("http://127.0.0.1", "")


def test_text_from_the_document_is_escaped() -> None:
    document = {
        "info": {"title": "<b>t</b>", "version": "1"},
        "paths": {"/x": {"get": {"tags": ["<i>"], "description": "a `<script>` b", "responses": {}}}},
    }
    text = render_docs(document)
    assert "<script>" not in text and "<code>&lt;script&gt;</code>" in text and "<b>t</b>" not in text


async def test_static_files_are_served_and_nothing_else(client: Any) -> None:
    css = await client.get("/static/devtools.css")
    assert css.status_code == 200 and css.content_type.startswith("text/css")
    assert (await client.get("/static/../app.py")).status_code == 404
    assert (await client.get("/static/nope.css")).status_code == 404


def only_this_origin(browser: Any, base: str, elsewhere: list[str], problems: list[str]) -> Any:
    """A page on which every request to another origin is refused and recorded (as if there
    were no network but volthub), and console errors (CSP violations) are recorded."""
    context = browser.new_context()

    def gate(route: Any) -> None:
        if route.request.url.startswith(base):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", gate)
    page = context.new_page()
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return page


def browse_offline(base: str) -> dict[str, Any]:
    """Runs in a worker thread: Playwright's sync API owns its own event loop there."""
    from playwright.sync_api import sync_playwright

    elsewhere: list[str] = []
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = only_this_origin(browser, base, elsewhere, problems)
            page.goto(f"{base}/", wait_until="load")
            page.click("#link-docs")
            page.wait_for_selector("#operations")
            result = {
                "operations": page.locator(".operation").count(),
                "tags": page.locator('nav a[href^="#tag-"]').count(),
                # The stylesheet (volthub's own file) applied: methods are boxed.
                "border": page.eval_on_selector(".method.get", "e => getComputedStyle(e).borderTopStyle"),
                "title": page.title(),
            }
            page.click('nav a[href="#tag-sandbox"]')
            result["sandbox_visible"] = page.locator("#tag-sandbox").is_visible()
        finally:
            browser.close()
    return {**result, "elsewhere": elsewhere, "problems": problems}


async def test_docs_render_in_chromium_with_no_network_but_volthub(
    live_server: LiveServer,
    chromium: str,  # noqa: F811
    client: Any,
) -> None:
    document = await (await client.get("/api/openapi.json")).get_json()
    expected = sum(1 for ops in document["paths"].values() for m in METHODS if m in ops)
    seen = await trio.to_thread.run_sync(browse_offline, live_server.url)
    assert seen["elsewhere"] == [] and seen["problems"] == []
    assert seen["operations"] == expected and seen["tags"] > 10
    assert seen["border"] == "solid" and "API reference" in seen["title"]
    assert seen["sandbox_visible"] is True


@pytest.mark.parametrize("path", ["/", "/docs"])
async def test_pages_need_no_token(client: Any, path: str) -> None:
    assert (await client.get(path)).status_code == 200
