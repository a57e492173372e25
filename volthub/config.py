"""Settings: built-in defaults < TOML file (--config) < VOLTHUB_SECTION__KEY environment variables.

The models below are the single source of the defaults; `config/default.toml` documents
them and a test keeps the two equal. Every value is typed and validated at start, and a bad
value stops the start with a message that names the key.
"""

from __future__ import annotations

import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

ENV_PREFIX = "VOLTHUB_"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    max_body_bytes: int = Field(65536, ge=1024, le=64 * 1024 * 1024)
    graceful_timeout_seconds: float = Field(10.0, ge=0, le=600)
    public_url: str = ""


class DatabaseSettings(Section):
    url: str = "sqlite:///var/volthub.db"
    pool_size: int = Field(8, ge=1, le=256)

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return url


class AuthSettings(Section):
    # Empty means: generate one on first start and keep it in the database, so every
    # process sharing that database signs and verifies with the same key.
    token_secret: str = ""
    session_ttl_seconds: int = Field(7 * 24 * 3600, ge=60, le=365 * 24 * 3600)
    # argon2id cost; the defaults follow argon2-cffi's (RFC 9106 "second choice").
    argon2_time_cost: int = Field(3, ge=1, le=20)
    argon2_memory_kib: int = Field(65536, ge=1024, le=4 * 1024 * 1024)


class Settings(Section):
    server: ServerSettings = ServerSettings()
    database: DatabaseSettings = DatabaseSettings()
    auth: AuthSettings = AuthSettings()


class ConfigError(Exception):
    """A configuration value is missing, unknown or invalid; the message names the key."""


def load_settings(
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Settings:
    """Merge the layers and validate once, so every error names its `section.key`."""
    merged: dict[str, dict[str, Any]] = {}
    if config_file is not None:
        _merge(merged, _read_toml(Path(config_file)))
    _merge(merged, _from_environment(os.environ if environ is None else environ))
    if overrides:
        _merge(merged, {k: dict(v) for k, v in overrides.items()})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _read_toml(path: Path) -> dict[str, dict[str, Any]]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    for section, values in data.items():
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: expected a [section] table in {path}")
    return data


def _from_environment(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        found.setdefault(section, {})[key] = _coerce_env(section, key, raw)
    return found


def _coerce_env(section: str, key: str, raw: str) -> Any:
    """Environment values are strings; lists are written comma-separated."""
    section_field = Settings.model_fields.get(section)
    if section_field is None or section_field.annotation is None:
        return raw
    field = section_field.annotation.model_fields.get(key)
    if field is not None and typing.get_origin(field.annotation) is list:
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


def _merge(into: dict[str, dict[str, Any]], layer: Mapping[str, Mapping[str, Any]]) -> None:
    for section, values in layer.items():
        into.setdefault(section, {}).update(values)


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        problems.append(f"{key}: {error['msg']}")
    return "invalid configuration: " + "; ".join(problems)


def defaults_as_dict() -> dict[str, dict[str, Any]]:
    return Settings().model_dump()
