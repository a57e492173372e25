"""Stream info and tags, categories and the ingest setup."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import make_settings, register
from tests.http.oauth.tokens import issue_oauth_token
from tests.http.streams.support import INFO, SETUP

TAGS = "/api/integrations/oauth/stream/tags"


@pytest.fixture
async def owner(client: Any) -> Any:
    return await register(client)


async def put(client: Any, owner: Any, **body: Any) -> Any:
    return await client.put(INFO, headers=owner.headers, json=body)


async def info(client: Any, owner: Any) -> dict[str, Any]:
    response = await client.get(INFO, headers=owner.headers)
    assert response.status_code == 200
    return dict(await response.get_json())


async def test_tags_are_stored_as_slugs_and_put_returns_what_was_stored(client: Any, owner: Any) -> None:
    response = await put(client, owner, title="Hello", category="Just Chatting", tags=["Speed Run", "my Custom tag"])
    assert response.status_code == 200
    body = await response.get_json()
    assert (body["title"], body["category"], body["tags"]) == ("Hello", "just-chatting", ["speed-run", "my-custom-tag"])
    assert body["categoryName"] == "Just Chatting"


async def test_omitted_fields_are_left_unchanged(client: Any, owner: Any) -> None:
    await put(client, owner, title="Kept", category="music", tags=["chill"], channelTags=["vtuber"], language="EN")
    await put(client, owner, tags=["cozy"])
    now = await info(client, owner)
    assert (now["title"], now["category"], now["tags"], now["channelTags"], now["language"]) == (
        "Kept",
        "music",
        ["cozy"],
        ["vtuber"],
        "en",
    )
    await put(client, owner, category=None)
    assert (await info(client, owner))["category"] is None


@pytest.mark.parametrize(
    ("field", "count"),
    [("tags", 8), ("channelTags", 6)],
)
async def test_a_list_over_its_limit_is_400_and_nothing_of_the_request_is_saved(
    client: Any, owner: Any, field: str, count: int
) -> None:
    await put(client, owner, title="Before", tags=["one"], channelTags=["two"])
    response = await put(client, owner, title="After", category="art", **{field: [f"tag {i}" for i in range(count)]})
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"] == "too_many_tags" and body["details"]["field"] == field
    assert body["details"]["limit"] == count - 1 and body["details"]["counted"] == count
    after = await info(client, owner)
    assert (after["title"], after["category"], after["tags"], after["channelTags"]) == (
        "Before",
        None,
        ["one"],
        ["two"],
    )


async def test_content_warnings_are_outside_both_limits_and_reported_from_both_lists(client: Any, owner: Any) -> None:
    tags = [f"t{i}" for i in range(7)] + ["Flashing lights", "18+", "Strong language"]
    channel_tags = [f"c{i}" for i in range(5)] + ["Gambling", "18+"]
    response = await put(client, owner, tags=tags, channelTags=channel_tags)
    assert response.status_code == 200, await response.get_data(as_text=True)
    got = await info(client, owner)
    assert len(got["tags"]) == 10 and len(got["channelTags"]) == 7
    assert got["contentWarnings"] == ["flashing-lights", "18-plus", "strong-language", "gambling"]


async def test_repeats_count_once_and_a_blank_tag_is_refused(client: Any, owner: Any) -> None:
    ok = await put(client, owner, tags=["Speed Run", "speed run", "SPEED-RUN"] + [f"t{i}" for i in range(6)])
    assert ok.status_code == 200 and len((await ok.get_json())["tags"]) == 7
    bad = await put(client, owner, title="x", tags=["fine", "%%%"])
    assert bad.status_code == 400 and (await bad.get_json())["error"] == "tag_invalid"
    assert (await info(client, owner))["title"] == ""


async def test_unknown_category_and_wrong_types_are_400(client: Any, owner: Any) -> None:
    unknown = await put(client, owner, title="t", category="not a category at all")
    assert unknown.status_code == 400 and (await unknown.get_json())["error"] == "unknown_category"
    assert (await info(client, owner))["title"] == ""
    for body in ({"tags": "speed-run"}, {"tags": [1]}, {"title": 5}, {"title": "x" * 141}):
        response = await client.put(INFO, headers=owner.headers, json=body)
        assert response.status_code == 400, body


async def test_the_tag_vocabulary(client: Any, owner: Any) -> None:
    response = await client.get(TAGS, headers=owner.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["limits"] == {"tags": 7, "channelTags": 5, "contentWarningsCount": False}
    assert body["customTagsAllowed"] is True
    by_slug = {entry["slug"]: entry for entry in body["tags"]}
    assert by_slug["speed-run"]["tier"] == "session" and by_slug["vtuber"]["tier"] == "identity"
    assert by_slug["chill"]["tier"] == "both"
    assert sum(entry["contentWarning"] for entry in body["tags"]) == 10
    assert by_slug["18-plus"]["contentWarning"] is True


async def test_categories_public_search_and_oauth_list(app: Any, client: Any, owner: Any) -> None:
    everything = (await (await client.get("/api/categories")).get_json())["items"]
    assert {"slug": "just-chatting", "name": "Just Chatting", "group": "irl"} in everything
    found = (await (await client.get("/api/categories/search?q=SPEED")).get_json())["items"]
    assert [c["slug"] for c in found] == ["speedrunning"]
    assert (await client.get("/api/categories/search")).status_code == 400
    token = await issue_oauth_token(app, owner.id, "stream:read")
    listed = await client.get("/api/integrations/oauth/stream/categories", headers={"Authorization": f"Bearer {token}"})
    assert (await listed.get_json())["items"] == everything


async def test_setup_offers_only_rtmp_by_default_and_needs_stream_key(app: Any, client: Any, owner: Any) -> None:
    """Out of the box the media server is nginx-rtmp, which serves no WHIP: none is offered."""
    response = await client.get(SETUP, headers=owner.headers)
    body = await response.get_json()
    assert body["preferredProtocol"] == "rtmp"
    assert body["ingest"] == [{"protocol": "rtmp", "url": "rtmp://127.0.0.1:1935/live"}]
    reader = await issue_oauth_token(app, owner.id, "stream:read stream:write")
    refused = await client.get(SETUP, headers={"Authorization": f"Bearer {reader}"})
    assert refused.status_code == 403 and (await refused.get_json())["error"] == "insufficient_scope"
    keyed = await issue_oauth_token(app, owner.id, "stream:key")
    assert (await client.get(SETUP, headers={"Authorization": f"Bearer {keyed}"})).status_code == 200
    # stream:read is needed for info, stream:write to change it
    assert (await client.get(INFO, headers={"Authorization": f"Bearer {keyed}"})).status_code == 403
    assert (
        await client.put(INFO, headers={"Authorization": f"Bearer {reader}"}, json={"title": "ok"})
    ).status_code == 200


async def test_srt_ingest_urls_are_refused_in_config() -> None:
    from volthub.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="ingest.rtmp_url"):
        load_settings(None, environ={"VOLTHUB_INGEST__RTMP_URL": "srt://host:9000"})


async def test_setup_offers_whip_first_when_the_media_server_serves_it(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    ingest = {"whip_url": "https://media.example/{username}/whip", "rtmp_url": "rtmp://media.example/live"}
    app = create_app(make_settings(sqlite_url, ingest=ingest))
    async with app.test_app():
        client = app.test_client()
        owner = await register(client, "whip_owner")
        response = await client.get(SETUP, headers=owner.headers)
        body = await response.get_json()
    assert body["preferredProtocol"] == "whip"
    assert body["ingest"] == [
        {"protocol": "whip", "url": "https://media.example/whip_owner/whip"},
        {"protocol": "rtmp", "url": "rtmp://media.example/live"},
    ]
    assert "srt://" not in (await response.get_data(as_text=True)).lower()


@pytest.mark.parametrize("tag", ["xx", "klingon", "en_US", "e1", "en-", "-en", "zz-ZZ", "english"])
async def test_a_language_not_in_the_bcp47_registry_is_refused(client: Any, owner: Any, tag: str) -> None:
    response = await put(client, owner, language=tag)
    answer = await response.get_json()
    assert response.status_code == 400, answer
    assert answer["error"] == "validation_error" and "language" in str(answer["details"])
    assert (await info(client, owner))["language"] is None


@pytest.mark.parametrize(
    "tag, stored", [("en", "en"), ("pt-BR", "pt-br"), ("zh-Hant-TW", "zh-hant-tw"), ("iw", "he"), ("DE-ch", "de-ch")]
)
async def test_a_registered_language_is_stored_in_its_canonical_form(
    client: Any, owner: Any, tag: str, stored: str
) -> None:
    response = await put(client, owner, language=tag)
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await info(client, owner))["language"] == stored
