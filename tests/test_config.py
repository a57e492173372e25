import tomllib
from pathlib import Path

import pytest

from volthub.config import ConfigError, defaults_as_dict, load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_default_toml_documents_every_key_with_its_default():
    with (ROOT / "config" / "default.toml").open("rb") as handle:
        documented = tomllib.load(handle)
    assert documented == defaults_as_dict()


def test_layers_file_then_environment(tmp_path):
    config = tmp_path / "volthub.toml"
    config.write_text('[server]\nport = 9001\nhost = "0.0.0.0"\n[database]\npool_size = 3\n')
    settings = load_settings(config, environ={"VOLTHUB_SERVER__PORT": "9002"})
    assert settings.server.port == 9002  # environment beats the file
    assert settings.server.host == "0.0.0.0"  # file beats the default
    assert settings.database.pool_size == 3
    assert settings.auth.session_ttl_seconds == 604800  # default


def test_environment_ignores_unrelated_variables():
    settings = load_settings(environ={"VOLTHUB_TEST_POSTGRES": "x", "PATH": "/bin"})
    assert settings.server.port == 8080


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"VOLTHUB_SERVER__PORT": "eighty"}, "server.port"),
        ({"VOLTHUB_SERVER__PORT": "70000"}, "server.port"),
        ({"VOLTHUB_DATABASE__URL": "mysql://x"}, "database.url"),
        ({"VOLTHUB_SERVER__NO_SUCH_KEY": "1"}, "server.no_such_key"),
        ({"VOLTHUB_NOSECTION__KEY": "1"}, "nosection"),
        ({"VOLTHUB_INGEST__RTMP_URL": ""}, "ingest"),  # no ingest address left to offer
        ({"VOLTHUB_INGEST__WHIP_URL": "srt://media:9000"}, "ingest.whip_url"),
    ],
)
def test_bad_value_names_its_key(environ, key):
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=environ)
    assert key in str(caught.value)


def test_bad_toml_and_missing_file_are_config_errors(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[server\nport=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(broken, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml", environ={})
