"""Display names nobody can impersonate with, on both backends: NFKC-normalised, no
invisible formatting characters, and never a look-alike (Unicode TR 39 skeleton) of another
account's username or of a reserved name, except one's own username in another case or
spacing. Wherever a display name is set: registration, PUT /api/users/me, `volthub users
create`."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import trio

from tests.conftest import make_settings, register, unique_name
from volthub.config import Settings
from volthub.persistence import migrate, open_database
from volthub.persistence.migrate import USERNAME_SKELETONS

PASSWORD = "correct horse battery"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


async def put_display_name(client: Any, user: Any, name: str) -> Any:
    return await client.put("/api/users/me", json={"displayName": name}, headers=user.headers)


async def assert_refused(response: Any) -> None:
    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["error"] == "validation_error", body
    assert [field["field"] for field in body["details"]["fields"]] == ["displayName"], body


def cyrillic_o(name: str) -> str:
    return name.replace("o", "\u043e")


@pytest.mark.parametrize(
    "name", ["admin", "Admin", "ＡＤＭＩＮ", "𝖆𝖉𝖒𝖎𝖓", "ad min", "\u0430dmin", "Moderator", "system"]
)
async def test_a_reserved_name_or_its_look_alike_is_refused(client: Any, name: str) -> None:
    user = await register(client)
    await assert_refused(await put_display_name(client, user, name))
    registered = await client.post(
        "/api/auth/register", json={"username": unique_name(), "password": PASSWORD, "displayName": name}
    )
    await assert_refused(registered)


@pytest.mark.parametrize("name", ["\u202eadmin", "ad\u200bmin", "Zoë\u200d", "\u2066bob\u2069", "Bo\u00adb"])
async def test_format_characters_are_refused(client: Any, name: str) -> None:
    user = await register(client)
    await assert_refused(await put_display_name(client, user, name))


async def test_another_accounts_username_or_its_look_alike_is_refused(client: Any) -> None:
    victim = await register(client, unique_name("bob"))
    impostor = await register(client)
    for name in (
        victim.username,
        victim.username.upper(),
        cyrillic_o(victim.username),
        victim.username.replace("_", " "),
    ):
        await assert_refused(await put_display_name(client, impostor, name))
    await assert_refused(
        await client.post(
            "/api/auth/register",
            json={"username": unique_name(), "password": PASSWORD, "displayName": cyrillic_o(victim.username)},
        )
    )
    profile = await (await client.get(f"/api/users/{impostor.username}")).get_json()
    assert profile["displayName"] == impostor.username  # nothing was written


async def test_ones_own_username_in_another_case_or_spacing_is_allowed(client: Any) -> None:
    base = unique_name("zed")
    own = await register(client, base.replace("zed", "zel", 1))
    await register(client, base.replace("zed", "ze1", 1))  # a look-alike of `own` held by someone else
    for name in (own.username.upper(), own.username.replace("_", " ").title()):
        response = await put_display_name(client, own, name)
        assert response.status_code == 200, await response.get_json()
        assert (await response.get_json())["displayName"] == name


async def test_a_display_name_is_stored_nfkc_normalised(client: Any) -> None:
    user = await register(client)
    response = await put_display_name(client, user, "Ｚｏｅ\uff5e")
    assert response.status_code == 200
    assert (await response.get_json())["displayName"] == "Zoe~"


async def test_users_create_refuses_a_look_alike_display_name(client: Any, settings: Settings) -> None:
    victim = await register(client, unique_name("bob"))
    argv = [sys.executable, "-m", "volthub", "users", "create", unique_name(), "--password", PASSWORD]
    argv += ["--database", settings.database.url]
    for name in (cyrillic_o(victim.username), "Admin", "ad\u200bmin"):
        result = await trio.run_process(
            [*argv, "--display-name", name], capture_stdout=True, capture_stderr=True, check=False
        )
        assert result.returncode in (1, 2) and b"displayName" in result.stderr, result.stderr


async def test_the_migration_reports_existing_names_that_break_the_rule_and_keeps_them(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    database = open_database(database_url)
    await database.open()
    try:
        await migrate(database)

        def before_the_rule(tx: Any) -> None:
            tx.execute("DELETE FROM schema_migrations WHERE version = ?", (USERNAME_SKELETONS,))
            tx.execute("DROP INDEX users_by_username_skeleton")
            tx.execute("ALTER TABLE users DROP COLUMN username_skeleton")
            for name, display in (("bob2", "bob2"), ("mallory", "b\u043eb2"), ("eve", "\u202eadmin")):
                tx.execute(
                    "INSERT INTO users (id, username, username_lower, display_name, password_hash, bio,"
                    " created_at, updated_at) VALUES (?, ?, ?, ?, 'x', '', 0, 0)",
                    (name + "-id", name, name, display),
                )

        await database.write(before_the_rule)
        with caplog.at_level(logging.WARNING, logger="volthub.persistence.migrate"):
            await migrate(database)
        reported = [record.getMessage() for record in caplog.records]
        assert any("mallory" in line and "another account's username" in line for line in reported), reported
        assert any("eve" in line for line in reported) and not any("bob2 " in line for line in reported)
        kept = await database.read(lambda tx: tx.scalar("SELECT display_name FROM users WHERE username = 'mallory'"))
        assert kept == "b\u043eb2"
    finally:
        await database.close()
