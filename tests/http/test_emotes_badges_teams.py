"""Emotes, uploaded images, badges and teams."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings, register
from tests.http.chat_env import ChatEnv

# A 1×1 PNG and GIF, real images.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")


async def upload(env: Any, user: Any, code: str, data: bytes, content_type: str = "image/png") -> Any:
    return await env.client.put(
        f"/api/emotes/mine/{code}", data=data, headers={**user.headers, "Content-Type": content_type}
    )


async def count_rows(env: Any, table: str) -> int:
    return int(await env.rt.db.read(lambda tx: tx.scalar(f"SELECT COUNT(*) FROM {table}")))


async def test_channel_emote_upload_list_resolve_and_serve(chat_env: ChatEnv):
    streamer = await chat_env.user()
    created = await upload(chat_env, streamer, "volt_hype", PNG)
    assert created.status_code == 201, await created.get_data(as_text=True)
    emote = await created.get_json()
    assert emote["scope"] == "channel" and emote["channelUsername"] == streamer.username
    image = await chat_env.client.get(emote["url"])
    assert image.status_code == 200 and await image.get_data() == PNG
    assert image.headers["Content-Type"] == "image/png"
    assert "immutable" in image.headers["Cache-Control"] and image.headers["ETag"]
    again = await chat_env.client.get(emote["url"], headers={"If-None-Match": image.headers["ETag"]})
    assert again.status_code == 304
    listed = await (await chat_env.client.get(f"/api/emotes/channel/{streamer.username.upper()}")).get_json()
    assert [e["code"] for e in listed["emotes"]] == ["volt_hype"]
    every = await (await chat_env.client.get(f"/api/emotes?channel={streamer.username}")).get_json()
    assert [c["id"].split(":")[0] for c in every["collections"]] == ["global", "channel"]
    resolved = await chat_env.client.get(f"/api/emotes/resolve?codes=:volt_hype:,nope&channel={streamer.username}")
    body = await resolved.get_json()
    assert body["emotes"]["volt_hype"]["url"] == emote["url"] and body["unknown"] == ["nope"]
    without_channel = await (await chat_env.client.get("/api/emotes/resolve?codes=volt_hype")).get_json()
    assert without_channel["unknown"] == ["volt_hype"]
    duplicate = await upload(chat_env, streamer, "volt_hype", GIF, "image/gif")
    assert duplicate.status_code == 409
    assert (await chat_env.client.delete("/api/emotes/mine/volt_hype", headers=streamer.headers)).status_code == 204
    assert (await chat_env.client.get(emote["url"])).status_code == 404
    assert await count_rows(chat_env, "media") == 0


@pytest.mark.parametrize(
    ("data", "content_type", "status", "code"),
    [
        (
            b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>",
            "image/png",
            415,
            "unsupported_image",
        ),
        (PNG, "image/gif", 415, "content_type_mismatch"),
        (b"", "image/png", 400, "empty_file"),
        (PNG + b"\0" * 70_000, "image/png", 413, None),
        (PNG, "text/plain", 415, "unsupported_media_type"),
    ],
)
async def test_refused_uploads_leave_nothing_behind(
    chat_env: ChatEnv, data: bytes, content_type: str, status: int, code: str | None
):
    streamer = await chat_env.user()
    response = await upload(chat_env, streamer, "bad_one", data, content_type)
    assert response.status_code == status
    if code:
        assert (await response.get_json())["error"] == code
    assert await count_rows(chat_env, "media") == 0 and await count_rows(chat_env, "emotes") == 0


async def test_emote_size_limit_and_disk_storage_leave_nothing_behind(tmp_path: Path, sqlite_url: str):
    from volthub.http.app import create_app

    directory = tmp_path / "media"
    app = create_app(
        make_settings(sqlite_url, media={"storage": "disk", "directory": str(directory), "emote_max_bytes": 100})
    )
    async with app.test_app():
        env = ChatEnv(app)
        user = await register(env.client)
        too_big = await upload(env, user, "big_one", PNG + b"\0" * 200)
        assert too_big.status_code == 413 and (await too_big.get_json())["error"] == "file_too_large"
        assert not directory.exists() or not any(directory.iterdir())
        ok = await upload(env, user, "small", PNG)
        assert ok.status_code == 201
        files = list(directory.iterdir())
        assert len(files) == 1 and files[0].read_bytes() == PNG
        assert (await env.client.get((await ok.get_json())["url"])).status_code == 200
        assert (await env.client.delete("/api/emotes/mine/small", headers=user.headers)).status_code == 204
        assert not any(directory.iterdir())


async def test_emote_only_mode_uses_the_emote_resolver(chat_env: ChatEnv):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    assert (await upload(chat_env, streamer, "hype", PNG)).status_code == 201
    await chat_env.patch_settings(streamer, emoteOnly=True)
    refused = await chat_env.send(viewer, streamer.id, ":unknown_code:")
    assert refused.status_code == 403 and (await refused.get_json())["error"] == "emote_only"
    assert (await chat_env.send(viewer, streamer.id, ":hype: :hype:")).status_code == 200
    message = chat_env.named("chat.message")[-1].data
    assert message["emotes"][0]["code"] == "hype" and message["emotes"][0]["url"].startswith("/api/media/")


async def test_badges_catalogue_channel_and_user(chat_env: ChatEnv):
    streamer, fan = await chat_env.user(), await chat_env.user()
    catalog = await (await chat_env.client.get("/api/badges/catalog")).get_json()
    slugs = {b["slug"] for b in catalog["badges"]}
    assert {"broadcaster", "moderator", "vip", "subscriber", "bot"} <= slugs
    system = await (await chat_env.client.get("/api/badges/catalog?category=system")).get_json()
    assert {b["category"] for b in system["badges"]} == {"system"}
    assert (await chat_env.client.get("/api/badges/catalog?category=nope")).status_code == 400
    channel = await (await chat_env.client.get(f"/api/badges/channel/{streamer.username}")).get_json()
    assert channel["badges"] == []  # nobody subscribed yet (tests/http/test_channel_badges.py)
    await chat_env.subscribe(streamer.id, fan.id)
    await chat_env.grant(streamer.id, fan.id, "vip")
    await chat_env.rt.services.badges.award(fan.username, "founder", None)
    mine = await (await chat_env.client.get(f"/api/badges/user/{fan.username}?channel={streamer.username}")).get_json()
    chat_slugs = [b["slug"] for b in mine["badges"] if b["source"] == "chat"]
    assert (await chat_env.send(fan, streamer.id, "hi")).status_code == 200
    assert chat_slugs == chat_env.named("chat.message")[-1].data["badges"] == ["vip", "subscriber"]
    assert [b["slug"] for b in mine["badges"] if b["source"] == "awarded"] == ["founder"]
    alone = await (await chat_env.client.get(f"/api/badges/user/{fan.username}")).get_json()
    assert [b["slug"] for b in alone["badges"]] == ["founder"]
    assert (await chat_env.client.get("/api/badges/user/nobody_here_x")).status_code == 404


async def test_teams(chat_env: ChatEnv):
    a, b = await chat_env.user(), await chat_env.user()
    teams = chat_env.rt.services.teams
    await teams.create("night-owls", "Night Owls", "late streams")
    await teams.add_member("night-owls", b.username)
    await teams.add_member("night-owls", a.username, "owner")
    listed = await (await chat_env.client.get("/api/teams")).get_json()
    assert "night-owls" in [t["slug"] for t in listed["items"]]
    team = await (await chat_env.client.get("/api/teams/night-owls")).get_json()
    assert team["memberCount"] == 2 and team["name"] == "Night Owls"
    page = await (await chat_env.client.get("/api/teams/night-owls/members?limit=1")).get_json()
    assert [m["username"] for m in page["items"]] == [a.username] and page["nextCursor"]
    rest = await (
        await chat_env.client.get(f"/api/teams/night-owls/members?limit=1&cursor={page['nextCursor']}")
    ).get_json()
    assert [m["username"] for m in rest["items"]] == [b.username] and rest["nextCursor"] is None
    assert (await chat_env.client.get("/api/teams/nope")).status_code == 404
    with pytest.raises(ValueError):
        await teams.create("Bad Slug", "x")


def png_of(width: int, height: int) -> bytes:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("L", (width, height)).save(out, "PNG", optimize=True)
    return out.getvalue()


def png_header_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims a size its (missing) pixel data never had: a bomb's head."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("size", [(2000, 2000), (513, 8), (8, 600)])
async def test_an_emote_image_of_unreasonable_pixel_size_is_refused(chat_env: ChatEnv, size: tuple[int, int]) -> None:
    streamer = await chat_env.user()
    before = await count_rows(chat_env, "media")
    refused = await upload(chat_env, streamer, "too_big", png_of(*size))
    answer = await refused.get_json()
    assert refused.status_code == 400 and answer["error"] == "invalid_image_dimensions", answer
    assert answer["details"].items() >= {"width": size[0], "height": size[1], "maxSide": 512}.items()
    assert await count_rows(chat_env, "media") == before
    assert (await upload(chat_env, streamer, "fine", png_of(112, 112))).status_code == 201


async def test_a_header_claiming_a_huge_image_is_refused(chat_env: ChatEnv) -> None:
    streamer = await chat_env.user()
    refused = await upload(chat_env, streamer, "bomb", png_header_claiming(65_535, 65_535))
    assert refused.status_code == 400 and (await refused.get_json())["error"] == "invalid_image_dimensions"
    garbage = await upload(chat_env, streamer, "garbage", b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    assert garbage.status_code == 415


async def test_uploads_authenticate_before_checking_the_content_type(chat_env: ChatEnv) -> None:
    for method, path in (("PUT", "/api/emotes/mine/some_code"), ("POST", "/api/journals/x/images")):
        response = await chat_env.client.open(
            path, method=method, data=b"not an image", headers={"Content-Type": "text/plain"}
        )
        assert response.status_code == 401, (path, await response.get_data(as_text=True))
