"""Journal rendering is bounded and off the hot path: a body is rendered once when it is
written (in a worker thread), refused when it would cost too much, and reads serve the
stored HTML; rows written before the HTML was stored are rendered once, on first read."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.http.chat_env import ChatEnv
from tests.http.oauth.tokens import oauth_headers
from volthub.protocol import markdown


@pytest.fixture
async def writer(backend_chat_env: ChatEnv) -> Any:
    user = await backend_chat_env.user()
    user.oauth = await oauth_headers(backend_chat_env.app, user.id, ["journal:read", "journal:write"])
    return user


async def journal_rows(env: ChatEnv) -> list[dict[str, Any]]:
    return await env.rt.db.read(lambda tx: [dict(row) for row in tx.execute("SELECT * FROM journals")])


@pytest.mark.parametrize(
    "body",
    [
        "![" * 25_000,
        "[" * (markdown.INLINE_MARKUP_MAX + 1),
        "*a" * (markdown.INLINE_MARKUP_MAX + 1),
        ("a " + "[" * markdown.INLINE_MARKUP_MAX + "\n\n") + "| a | b |\n| - | - |\n| " + "_x" * 600 + " | b |",
    ],
)
async def test_a_body_too_costly_to_render_is_refused_and_nothing_is_stored(
    backend_chat_env: ChatEnv, writer: Any, body: str
) -> None:
    env = backend_chat_env
    refused = await env.client.post("/api/journals", json={"title": "Slow", "body": body}, headers=writer.oauth)
    answer = await refused.get_json()
    assert refused.status_code == 400, answer
    assert answer["error"] == "validation_error" and answer["details"]["field"] == "body"
    assert await journal_rows(env) == []
    await env.client.post("/api/journals", json={"title": "Fine", "body": "ok"}, headers=writer.oauth)
    changed = await env.client.put("/api/journals/fine", json={"body": body}, headers=writer.oauth)
    assert changed.status_code == 400
    [row] = await journal_rows(env)
    assert row["body"] == "ok"


async def test_a_body_is_rendered_once_in_a_worker_thread_and_reads_do_not_render(
    backend_chat_env: ChatEnv, writer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = backend_chat_env
    threads: list[threading.Thread] = []
    real_render = markdown.render_post

    def watched(text: str) -> Any:
        threads.append(threading.current_thread())
        return real_render(text)

    monkeypatch.setattr(markdown, "render_post", watched)
    body = "**Hi** there [link](https://example.com)"
    created = await env.client.post(
        "/api/journals", json={"title": "Once", "body": body, "publish": True}, headers=writer.oauth
    )
    assert created.status_code == 201, await created.get_data(as_text=True)
    expected = (await created.get_json())["html"]
    assert len(threads) == 1 and threads[0] is not threading.main_thread()

    def no_rendering(*_: Any, **__: Any) -> Any:
        raise AssertionError("a read rendered Markdown")

    monkeypatch.setattr(markdown, "render_post", no_rendering)
    monkeypatch.setattr(markdown, "render", no_rendering)
    monkeypatch.setattr(markdown, "excerpt", no_rendering)
    monkeypatch.setattr(markdown._PARSER, "render", no_rendering)
    public = f"/api/users/{writer.username}/journals"
    one = await env.client.get(f"{public}/once")
    assert one.status_code == 200, await one.get_data(as_text=True)
    assert (
        (await one.get_json())["html"]
        == expected
        == "<p><strong>Hi</strong> there "
        + ('<a href="https://example.com" rel="nofollow noopener noreferrer">link</a></p>\n')
    )
    listed = await (await env.client.get(public)).get_json()
    assert listed["items"][0]["excerpt"] == "Hi there link"
    mine = await env.client.get("/api/journals/once", headers=writer.oauth)
    assert mine.status_code == 200


async def test_a_row_from_before_stored_html_is_rendered_on_first_read_and_kept(
    backend_chat_env: ChatEnv, writer: Any
) -> None:
    env = backend_chat_env
    await env.client.post("/api/journals", json={"title": "Old", "body": "x", "publish": True}, headers=writer.oauth)
    await env.rt.db.write(
        lambda tx: tx.execute("UPDATE journals SET body = ?, html = NULL, excerpt = NULL", ("_old_ post",))
    )
    read = await (await env.client.get(f"/api/users/{writer.username}/journals/old")).get_json()
    assert read["html"] == "<p><em>old</em> post</p>\n" and read["excerpt"] == "old post"
    [row] = await journal_rows(env)
    assert (row["html"], row["excerpt"]) == ("<p><em>old</em> post</p>\n", "old post")
