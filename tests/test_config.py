import tomllib
from pathlib import Path

import pytest

from volthub.config import ConfigError, defaults_as_dict, events_ws_url, load_settings

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
        ({"VOLTHUB_CLUSTER__BROKER": "kafka"}, "cluster.broker"),
        ({"VOLTHUB_CLUSTER__BROKER": "redis"}, "cluster"),  # and no address
        ({"VOLTHUB_CLUSTER__REDIS_URL": "http://x"}, "cluster.redis_url"),
        ({"VOLTHUB_CLUSTER__REDIS_CLUSTER_NODES": "10.0.0.1"}, "cluster.redis_cluster_nodes"),
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


def test_the_gateway_is_on_by_default_and_clients_are_told_its_address():
    settings = load_settings(environ={})
    assert settings.events.gateway_port == 8081
    assert events_ws_url(settings) == "ws://127.0.0.1:8081"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"VOLTHUB_EVENTS__PUBLIC_WS_URL": "wss://events.example.com/"}, "wss://events.example.com"),
        ({"VOLTHUB_SERVER__PUBLIC_URL": "https://live.example.com"}, "wss://live.example.com:8081"),
        ({"VOLTHUB_SERVER__PUBLIC_URL": "http://live.example.com:8080"}, "ws://live.example.com:8081"),
        ({"VOLTHUB_EVENTS__GATEWAY_HOST": "::1"}, "ws://[::1]:8081"),
        ({"VOLTHUB_EVENTS__GATEWAY_PORT": "0"}, "ws://127.0.0.1:8080"),
        (
            {"VOLTHUB_EVENTS__GATEWAY_PORT": "0", "VOLTHUB_SERVER__PUBLIC_URL": "https://live.example.com/base/"},
            "wss://live.example.com/base",
        ),
    ],
)
def test_the_ws_url_clients_are_told(environ, expected):
    assert events_ws_url(load_settings(environ=environ)) == expected


def test_public_ws_url_must_be_a_websocket_or_http_address():
    with pytest.raises(ConfigError, match="events.public_ws_url"):
        load_settings(environ={"VOLTHUB_EVENTS__PUBLIC_WS_URL": "ftp://x"})


def test_the_redis_broker_is_chosen_by_environment():
    settings = load_settings(
        environ={"VOLTHUB_CLUSTER__BROKER": "redis", "VOLTHUB_CLUSTER__REDIS_URL": "rediss://cache:6380/0"}
    )
    assert settings.cluster.broker == "redis"
    assert settings.cluster.redis_url == "rediss://cache:6380/0"
    nodes = load_settings(environ={"VOLTHUB_CLUSTER__REDIS_CLUSTER_NODES": "10.0.0.1:6379,10.0.0.2:6379"})
    assert nodes.cluster.redis_cluster_nodes == ["10.0.0.1:6379", "10.0.0.2:6379"]
    assert load_settings(environ={}).cluster.broker == "postgres"


@pytest.mark.parametrize(
    "overrides",
    [
        {"extvideo": {"base_url": "https://video.example", "client_id": "c"}},
        {"extvideo": {"base_url": "https://video.example", "client_id": "c"}, "server": {"public_url": "volthub"}},
        {"extvideo": {"base_url": "https://video.example", "client_id": "c", "redirect_uri": "/api/extvideo/cb"}},
    ],
)
def test_extvideo_refuses_to_start_without_an_absolute_redirect_uri(overrides):
    with pytest.raises(ConfigError) as excinfo:
        load_settings(environ={}, overrides=overrides)
    assert "extvideo.redirect_uri" in str(excinfo.value)


def test_extvideo_redirect_uri_comes_from_public_url_or_its_own_key():
    configured = {"base_url": "https://video.example", "client_id": "c"}
    from_public = load_settings(
        environ={}, overrides={"extvideo": configured, "server": {"public_url": "https://volthub.example/"}}
    )
    assert from_public.extvideo.callback_url(from_public.server.public_url) == (
        "https://volthub.example/api/extvideo/auth/callback"
    )
    own = load_settings(environ={}, overrides={"extvideo": {**configured, "redirect_uri": "https://a.example/cb"}})
    assert own.extvideo.callback_url("") == "https://a.example/cb"
    assert load_settings(environ={}, overrides={}).extvideo.base_url == ""  # off: nothing to check


def test_cors_origins_come_from_the_environment_and_the_events_paths_follow_the_server() -> None:
    settings = load_settings(environ={"VOLTHUB_SERVER__CORS_ORIGINS": "https://a.example, http://127.0.0.1:5173"})
    assert settings.server.cors_origins == ["https://a.example", "http://127.0.0.1:5173"]
    assert settings.events.origins_for_browsers(settings.server) == ["https://a.example", "http://127.0.0.1:5173"]
    own = load_settings(environ={"VOLTHUB_EVENTS__CORS_ORIGINS": "https://b.example"})
    assert own.events.origins_for_browsers(own.server) == ["https://b.example"]
    assert own.server.cors_origins == ["*"]
    assert load_settings(environ={"VOLTHUB_SERVER__CORS_ORIGINS": "null"}).server.cors_origins == ["null"]


@pytest.mark.parametrize("value", ["https://a.example/", "a.example", "https://a.example/path"])
def test_a_cors_origin_with_a_path_or_no_scheme_names_its_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"server\.cors_origins.*scheme://host"):
        load_settings(environ={"VOLTHUB_SERVER__CORS_ORIGINS": value})


def test_trusted_proxies_come_comma_separated_from_the_environment_and_a_bad_one_is_named() -> None:
    assert load_settings(environ={}).server.trusted_proxies == []
    settings = load_settings(environ={"VOLTHUB_SERVER__TRUSTED_PROXIES": "127.0.0.1/32, 10.0.0.0/8"})
    assert settings.server.trusted_proxies == ["127.0.0.1/32", "10.0.0.0/8"]
    with pytest.raises(ConfigError, match=r"server.trusted_proxies: .*'10.0.0.300'"):
        load_settings(environ={"VOLTHUB_SERVER__TRUSTED_PROXIES": "10.0.0.300"})
