"""`volthub apps list | review | grant | revoke` against a real database file."""

from __future__ import annotations

import uuid

import pytest
import trio

from tests.conftest import create_test_app
from volthub.cli import main
from volthub.persistence import apps as apps_repo
from volthub.persistence import migrate, open_database
from volthub.persistence import oauth as oauth_repo
from volthub.persistence import users as users_repo


def _run(url: str, fn):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        database = open_database(url)
        await database.open()
        try:
            await migrate(database)
            return await database.write(fn)
        finally:
            await database.close()

    return trio.run(go)


@pytest.fixture
def seeded(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    user_id, client_id, grant_id = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())

    def seed(tx):  # type: ignore[no-untyped-def]
        users_repo.create_user(
            tx, user_id=user_id, username="cli_owner", display_name="Owner", password_hash="h", now_ms=1
        )
        create_test_app(tx, client_id, user_id, "CLI app", redirect_uris=())
        oauth_repo.grant_app_scope(tx, client_id, "chat:moderate", 1)
        oauth_repo.create_grant(
            tx,
            grant_id=grant_id,
            user_id=user_id,
            client_id=client_id,
            consented_scope="chat:read chat:moderate",
            held={"chat:read", "chat:moderate"},
            now_ms=1,
        )

    _run(url, seed)
    return url, client_id, grant_id


def test_review_grant_revoke_and_list(seeded, capsys):
    url, client_id, grant_id = seeded
    assert main(["apps", "review", client_id, "--database", url]) == 0
    assert _run(url, lambda tx: apps_repo.get_app(tx, client_id)).reviewed is True
    assert main(["apps", "grant", client_id, "stream:key", "payments:write", "--database", url]) == 0
    assert set(_run(url, lambda tx: oauth_repo.app_scope_grants(tx, client_id))) == {
        "chat:moderate",
        "stream:key",
        "payments:write",
    }

    assert main(["apps", "revoke", client_id, "chat:moderate", "--database", url]) == 0
    assert "removed from 1 connection" in capsys.readouterr().out
    assert _run(url, lambda tx: oauth_repo.get_grant(tx, grant_id)).held == {"chat:read"}

    assert main(["apps", "list", "--database", url]) == 0
    line = capsys.readouterr().out.strip()
    assert line == f"{client_id}\tCLI app\tcli_owner\treviewed\tpayments:write,stream:key"
    assert main(["apps", "review", client_id, "--unset", "--database", url]) == 0
    assert _run(url, lambda tx: apps_repo.get_app(tx, client_id)).reviewed is False


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["grant", "CID", "chat:read"], 2, "not sensitive"),
        (["grant", "CID", "streams:key:read"], 2, "legacy alias"),
        (["grant", "CID", "chat:everything"], 2, "unknown scope"),
        (["grant", "no-such-app", "stream:key"], 1, "no app"),
        (["review", "no-such-app"], 1, "no app"),
    ],
)
def test_refusals(seeded, capsys, argv, code, message):
    url, client_id, _ = seeded
    argv = [client_id if a == "CID" else a for a in argv]
    assert main(["apps", *argv, "--database", url]) == code
    assert message in capsys.readouterr().err
    assert set(_run(url, lambda tx: oauth_repo.app_scope_grants(tx, client_id))) == {"chat:moderate"}
