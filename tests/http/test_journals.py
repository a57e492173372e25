"""Journals: drafts, publish, slugs, public reads, safe Markdown, images."""

from __future__ import annotations

from typing import Any

import pytest

from tests.http.chat_env import ChatEnv
from tests.http.oauth.tokens import issue_oauth_token
from tests.http.test_emotes_badges_teams import GIF, PNG, count_rows


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def author(chat_env: ChatEnv) -> Any:
    user = await chat_env.user()
    user.oauth = bearer(await issue_oauth_token(chat_env.app, user.id, ["journal:read", "journal:write"]))
    return user


async def test_draft_publish_and_public_reads(chat_env: ChatEnv, author: Any):
    client = chat_env.client
    created = await client.post(
        "/api/journals", json={"title": "Hello, World: Part 2!", "body": "**Hi** there"}, headers=author.oauth
    )
    assert created.status_code == 201, await created.get_data(as_text=True)
    journal = await created.get_json()
    assert journal["slug"] == "hello-world-part-2" and journal["status"] == "draft"
    assert journal["html"] == "<p><strong>Hi</strong> there</p>\n" and journal["publishedAt"] is None
    again = await client.post("/api/journals", json={"title": "Hello world part 2"}, headers=author.oauth)
    assert (await again.get_json())["slug"] == "hello-world-part-2-2"
    clash = await client.post("/api/journals", json={"title": "x", "slug": "hello-world-part-2"}, headers=author.oauth)
    assert clash.status_code == 409 and (await clash.get_json())["error"] == "slug_taken"
    public = f"/api/users/{author.username}/journals"
    assert (await (await client.get(public)).get_json())["items"] == []
    assert (await client.get(f"{public}/hello-world-part-2")).status_code == 404  # a draft
    mine = await (await client.get("/api/journals", headers=author.oauth)).get_json()
    assert len(mine["items"]) == 2
    published = await client.post("/api/journals/hello-world-part-2/publish", headers=author.oauth)
    first = (await published.get_json())["publishedAt"]
    assert published.status_code == 200 and first is not None
    republished = await client.post("/api/journals/hello-world-part-2/publish", headers=author.oauth)
    assert (await republished.get_json())["publishedAt"] == first
    listed = await (await client.get(public.replace(author.username, author.username.upper()))).get_json()
    assert [j["slug"] for j in listed["items"]] == ["hello-world-part-2"] and listed["items"][0][
        "excerpt"
    ] == "Hi there"
    read = await (await client.get(f"{public}/hello-world-part-2")).get_json()
    assert read["body"] == "**Hi** there"
    changed = await client.put(
        "/api/journals/hello-world-part-2", json={"slug": "renamed", "body": "new"}, headers=author.oauth
    )
    assert changed.status_code == 200 and (await changed.get_json())["slug"] == "renamed"
    assert (await client.put("/api/journals/renamed", json={"title": None}, headers=author.oauth)).status_code == 400
    assert (
        await client.put("/api/journals/renamed", json={"slug": "Bad Slug"}, headers=author.oauth)
    ).status_code == 400
    assert (await client.delete("/api/journals/renamed", headers=author.oauth)).status_code == 204
    assert (await client.get(f"{public}/renamed")).status_code == 404
    assert (await client.get("/api/users/no_such_user_here/journals")).status_code == 404


async def test_scopes(chat_env: ChatEnv):
    user = await chat_env.user()
    reader = bearer(await issue_oauth_token(chat_env.app, user.id, ["journal:read"]))
    assert (await chat_env.client.get("/api/journals", headers=reader)).status_code == 200
    assert (await chat_env.client.post("/api/journals", json={"title": "x"}, headers=reader)).status_code == 403
    assert (await chat_env.client.post("/api/journals", json={"title": "x"}, headers=user.headers)).status_code == 201


async def test_markdown_is_sanitised(chat_env: ChatEnv, author: Any):
    body = (
        "<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
        "[bad](javascript:alert(1)) [good](https://example.com) ![tracker](https://evil.example/p.png)"
    )
    created = await chat_env.client.post("/api/journals", json={"title": "XSS", "body": body}, headers=author.oauth)
    html = (await created.get_json())["html"]
    assert "<script" not in html and "onerror" not in html.replace("onerror=alert(1)&gt;", "")
    assert "<img src=x" not in html and 'href="javascript' not in html
    assert '<a href="https://example.com" rel="nofollow noopener noreferrer">good</a>' in html
    assert "evil.example" not in html


async def test_images_upload_and_refusals_leave_nothing(chat_env: ChatEnv, author: Any):
    client = chat_env.client
    await client.post("/api/journals", json={"title": "Pics"}, headers=author.oauth)
    url = "/api/journals/pics/images"
    ok = await client.post(url, data=GIF, headers={**author.oauth, "Content-Type": "image/gif"})
    assert ok.status_code == 201, await ok.get_data(as_text=True)
    image = await ok.get_json()
    assert image["contentType"] == "image/gif" and image["markdown"] == f"![]({image['url']})"
    assert await (await client.get(image["url"])).get_data() == GIF
    shown = await client.put("/api/journals/pics", json={"body": image["markdown"]}, headers=author.oauth)
    assert f'src="{image["url"]}"' in (await shown.get_json())["html"]
    before = await count_rows(chat_env, "media")
    for data, kind, status in (
        (b"%PDF-1.4 not an image", "image/png", 415),
        (PNG, "image/jpeg", 415),
        (PNG + b"\0" * 70_000, "image/png", 413),
        (PNG, "application/octet-stream", 415),
    ):
        refused = await client.post(url, data=data, headers={**author.oauth, "Content-Type": kind})
        assert refused.status_code == status, kind
    missing = await client.post(
        "/api/journals/nope/images", data=PNG, headers={**author.oauth, "Content-Type": "image/png"}
    )
    assert missing.status_code == 404
    assert await count_rows(chat_env, "media") == before == await count_rows(chat_env, "journal_images")
    assert (await client.delete("/api/journals/pics", headers=author.oauth)).status_code == 204
    assert await count_rows(chat_env, "media") == 0
    assert (await client.get(image["url"])).status_code == 404
