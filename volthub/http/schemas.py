"""Shared request/response models. One validator style: pydantic models via quart-schema."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from volthub.protocol import names


def _trimmed_non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value.strip()


# Characters that draw nothing although Unicode does not class them as format or space.
_BLANK_LOOKING = frozenset("\u115f\u1160\u17b4\u17b5\u180e\u2800\u3164\uffa0")
# Format (zero-width, joiners, BOM, soft hyphen), control, space, separator, combining
# and unassigned characters.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"})


def _has_visible(value: str) -> str:
    if not any(ch not in _BLANK_LOOKING and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES for ch in value):
        raise ValueError("must hold a visible character")
    return value


def _normalised(value: str) -> str:
    return names.normalised_display_name(value)  # its UnsafeName is a ValueError: a 400


# A person's display name: 1–50 characters, NFKC-normalised, surrounding space trimmed,
# never blank, no invisible formatting characters (bidi controls, zero-width), never only
# invisible characters (fillers, lone combining marks). Whether it looks like someone
# else's name is the accounts service's check (it needs the database).
DisplayName = Annotated[
    str,
    Field(min_length=1, max_length=50),
    AfterValidator(_normalised),
    AfterValidator(_trimmed_non_blank),
    AfterValidator(_has_visible),
]


def _drop_null_defaults(schema: dict[str, Any]) -> None:
    """`Field(None)` on a non-nullable type means "may be absent, never null": the field is
    already optional in the schema, and a null default would contradict its type."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None and "anyOf" not in prop:
            del prop["default"]


class Body(BaseModel):
    """Request bodies: strict types (no "1" for 1), unknown fields ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", json_schema_extra=_drop_null_defaults)


class Query(BaseModel):
    """Query strings arrive as text, so numbers are parsed, not strictly typed."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_drop_null_defaults)


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_drop_null_defaults)


class ErrorBody(Model):
    error: str
    message: str
    details: dict[str, Any] | None = None


class PageQuery(Query):
    limit: int = Field(20, ge=1, le=100)
    cursor: str | None = Field(None, max_length=512)


class PersonOut(Model):
    """The one shape of a person inside another object (mentions, moderators, winners, roles)."""

    userId: str
    username: str
    displayName: str


class UserOut(Model):
    id: str
    username: str
    displayName: str
    avatarUrl: str | None
    bio: str
    createdAt: str


class StatusOut(Model):
    status: str
