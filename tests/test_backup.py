"""`volthub backup` while the server serves and chat sends flow, then `volthub restore` into an
empty database: every send acknowledged before the backup began is in it, and a server on it
migrates and serves (both backends). Restore refuses a database that holds data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.conftest import make_settings, opened_database, register_live, serve_app
from volthub.cli import main

pytestmark = pytest.mark.slow
WAIT = 30.0  # generous: a busy machine answers slowly, never wrongly


@pytest.fixture(params=["sqlite", "postgres"])
def source_and_target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A migrated database to back up, and an empty one to restore into."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url"), f"sqlite:///{tmp_path / 'restored' / 'volthub.db'}"
    return request.getfixturevalue("postgres_url"), request.getfixturevalue("empty_postgres_url")


async def _cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = await trio.to_thread.run_sync(main, list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_backup_while_sends_flow_restores_every_acknowledged_send(
    source_and_target: tuple[str, str], tmp_path: Path, nursery: trio.Nursery, capsys: Any
) -> None:
    source, target = source_and_target
    backup_file = tmp_path / "backups" / "volthub.backup"
    stop = trio.Event()
    server = await serve_app(nursery, make_settings(source, events={"gateway_port": 0}), stop)
    owner = await register_live(server.url)
    acknowledged: list[str] = []
    refused: list[str] = []
    senders_done = trio.Event()

    async def send_until_told(http: httpx.AsyncClient, sender: int) -> None:
        index = 0
        while not senders_done.is_set():
            response = await http.post(
                f"/api/integrations/oauth/chat/channels/{owner.id}/messages",
                json={"message": f"sender {sender} message {index}"},
                headers=owner.headers,
            )
            if response.status_code == 200:
                acknowledged.append(response.json()["messageId"])
            else:
                refused.append(f"{response.status_code} {response.text}")
            index += 1

    async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http, trio.open_nursery() as senders:
        for sender in range(4):
            senders.start_soon(send_until_told, http, sender)
        with trio.fail_after(WAIT):
            while len(acknowledged) < 40:
                await trio.sleep(0.01)
        before_backup = set(acknowledged)
        code, out, err = await _cli(capsys, "backup", "--database", source, "--to", str(backup_file))
        during_backup = len(acknowledged) - len(before_backup)
        with trio.fail_after(WAIT):  # the server still serves after the backup
            while len(acknowledged) < len(before_backup) + during_backup + 10:
                await trio.sleep(0.01)
        senders_done.set()
    assert code == 0, err
    assert out.startswith("backed up ") and backup_file.stat().st_size > 0
    assert refused == []
    stop.set()

    code, out, err = await _cli(capsys, "restore", "--database", target, "--from", str(backup_file))
    assert code == 0, err
    assert out.startswith("restored ")
    async with opened_database(target) as restored:
        stored = await restored.read(lambda tx: {row["id"] for row in tx.execute("SELECT id FROM chat_messages")})
    assert before_backup <= stored, f"{len(before_backup - stored)} acknowledged sends missing"
    assert stored <= set(acknowledged)  # nothing that was not acknowledged (or in flight)

    # A server on the restored database migrates and serves; the owner's token still works.
    again = trio.Event()
    restored_server = await serve_app(nursery, make_settings(target, events={"gateway_port": 0}), again)
    async with httpx.AsyncClient(base_url=restored_server.url, timeout=WAIT) as http:
        me = await http.get("/api/users/me", headers=owner.headers)
        assert me.status_code == 200 and me.json()["id"] == owner.id
        history = await http.get(f"/api/chat/channels/{owner.id}/history")
        assert history.status_code == 200 and history.json()["messages"]
        sent = await http.post(
            f"/api/integrations/oauth/chat/channels/{owner.id}/messages",
            json={"message": "after the restore"},
            headers=owner.headers,
        )
        assert sent.status_code == 200, sent.text
    again.set()
    print(f"{len(before_backup)} sends acknowledged before the backup, {during_backup} while it ran")


async def test_restore_refuses_a_database_that_holds_data(
    source_and_target: tuple[str, str], tmp_path: Path, capsys: Any
) -> None:
    source, _ = source_and_target
    backup_file = tmp_path / "volthub.backup"
    code, _, err = await _cli(capsys, "backup", "--database", source, "--to", str(backup_file))
    assert code == 0, err
    code, out, err = await _cli(capsys, "restore", "--database", source, "--from", str(backup_file))
    assert code == 1
    assert out == ""
    assert len(err.splitlines()) == 1 and "is not empty" in err and "restore into a new database" in err, err


async def test_backup_and_restore_never_put_the_password_on_a_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from volthub.persistence import backup

    seen: list[tuple[list[str], dict[str, str]]] = []

    def recording_run(argv: list[str], env: dict[str, str], **_: Any) -> Any:
        seen.append((argv, env))
        return type("Completed", (), {"returncode": 0, "stderr": ""})()

    monkeypatch.setattr(backup.subprocess, "run", recording_run)
    monkeypatch.setattr(backup.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(backup, "tables_in", lambda url: [])
    url = "postgresql://volthub:s%40cret@db.example:5432/volthub?sslmode=require"
    (tmp_path / "in.dump").write_bytes(b"PGDMP")
    with pytest.raises(FileNotFoundError):  # the recording pg_dump wrote no file to move into place
        backup.backup(url, tmp_path / "out.dump")
    backup.restore(url, tmp_path / "in.dump")
    assert [argv[0] for argv, _ in seen] == ["/usr/bin/pg_dump", "/usr/bin/pg_restore"]
    for argv, env in seen:
        assert not any("s%40cret" in part or "s@cret" in part for part in argv), argv
        assert "--dbname=postgresql://volthub@db.example:5432/volthub?sslmode=require" in argv
        assert env["PGPASSWORD"] == "s@cret"
