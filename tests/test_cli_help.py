"""A server that explains itself: every command's help says what it does, `serve --help`
which signals do what, `apps grant --help` what it can grant; `config check` validates and
prints the effective settings with secrets masked; `config show-defaults` the default file."""

from __future__ import annotations

from pathlib import Path

import pytest

from volthub.cli import COMMANDS, _load_plugins, main
from volthub.protocol.oauth.scopes import SENSITIVE_SCOPES

ROOT = Path(__file__).resolve().parent.parent


def help_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_every_command_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    _load_plugins()
    overview = help_of(capsys)
    for name, (_, run) in COMMANDS.items():
        assert run.__doc__ and run.__doc__.strip(), f"{name} has no description"
        first_words = " ".join(run.__doc__.split()[:3])
        assert first_words in " ".join(overview.split()), name


def test_serve_help_names_the_signals(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "serve")
    for signal in ("SIGTERM", "SIGINT", "SIGHUP"):
        assert signal in text


def test_apps_grant_help_lists_the_grantable_scopes(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_of(capsys, "apps", "grant").split())
    for scope in SENSITIVE_SCOPES:
        assert scope in text


def test_config_check_masks_secrets_and_names_a_bad_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "volthub.toml"
    config.write_text(
        '[auth]\ntoken_secret = "very-secret-signing-key"\n'
        '[database]\nurl = "postgresql://app:db-password-1@db.example:5432/volthub"\n'
    )
    monkeypatch.setenv("VOLTHUB_INGEST__HOOK_SECRET", "hook-secret-2")
    assert main(["config", "check", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    for secret in ("very-secret-signing-key", "db-password-1", "hook-secret-2"):
        assert secret not in out
    assert 'url = "postgresql://app:***@db.example:5432/volthub"' in out
    assert 'token_secret = "***"' in out

    config.write_text("[server]\nport = 99999\n")
    assert main(["config", "check", "--config", str(config)]) == 2
    assert "server.port" in capsys.readouterr().err


def test_show_defaults_prints_the_documented_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show-defaults"]) == 0
    assert capsys.readouterr().out == (ROOT / "config" / "default.toml").read_text()
