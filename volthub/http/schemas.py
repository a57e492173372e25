"""Shared request/response models. One validator style: pydantic models via quart-schema."""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from volthub.hub.clock import iso8601
from volthub.protocol import names

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

DataclassT = TypeVar("DataclassT", bound="DataclassInstance")


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


def _finish_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """`Field(None)` on a non-nullable type means "may be absent, never null": the field is
    already optional in the schema, and a null default would contradict its type. A model's
    own `example` (a class attribute, not inherited) becomes the schema's `examples`: the
    OpenAPI document shows it and its tests validate it against the schema."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None and "anyOf" not in prop:
            del prop["default"]
    example = model.__dict__.get("example")
    if example is not None:
        schema["examples"] = [example]


def example_of(model: type[BaseModel]) -> dict[str, Any]:
    """The `example` a model sets itself: the piece a holder's example is built from, so one
    sample of an object serves every model that carries it."""
    example: dict[str, Any] | None = model.__dict__.get("example")
    if example is None:
        raise TypeError(f"{model.__name__} sets no example")
    return example


class Body(BaseModel):
    """Request bodies: strict types (no "1" for 1), unknown fields ignored."""

    # A sample of the JSON this model reads or writes (see _finish_schema); every model
    # that is a request or response body sets its own.
    example: ClassVar[dict[str, Any] | None] = None

    model_config = ConfigDict(strict=True, extra="ignore", json_schema_extra=_finish_schema)

    def to_dataclass(self, kind: type[DataclassT], **given: Any) -> DataclassT:
        """What this body asks of a service, as its dataclass `kind`, by the naming rule of
        `Model.from_record` the other way: each field of `kind` not `given` is this body's
        field of the same name in camelCase (`logo_url` from `logoUrl`)."""
        values = dict(given)
        for attribute, field in _body_fields(kind):
            if attribute not in values:
                values[attribute] = getattr(self, field)
        return kind(**values)


@functools.cache
def _body_fields(kind: type[DataclassInstance]) -> tuple[tuple[str, str], ...]:
    """Each field of the dataclass `kind` with the body field it is read from (`to_dataclass`)."""
    return tuple(
        (f.name, re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), f.name)) for f in dataclasses.fields(kind)
    )


class Query(BaseModel):
    """Query strings arrive as text, so numbers are parsed, not strictly typed."""

    example: ClassVar[dict[str, Any] | None] = None

    model_config = ConfigDict(extra="ignore", json_schema_extra=_finish_schema)


class Model(BaseModel):
    example: ClassVar[dict[str, Any] | None] = None
    model_config = ConfigDict(extra="forbid", json_schema_extra=_finish_schema)

    @classmethod
    def from_record(cls, record: object, **given: Any) -> Self:
        """This answer for a stored record, by the one naming rule: each field not `given`
        is the record's attribute of the same name in snake_case (`logoUrl` from
        `logo_url`), and a time (a field named `...At`) is stored as epoch milliseconds and
        answered in ISO 8601 (null stays null). What does not follow the rule is `given`."""
        values = dict(given)
        for field, attribute in _record_attributes(cls):
            if field not in values:
                value = getattr(record, attribute)
                values[field] = iso8601(value) if field.endswith("At") and value is not None else value
        return cls(**values)


@functools.cache
def _record_attributes(model: type[Model]) -> tuple[tuple[str, str], ...]:
    """Each field of `model` with the record attribute it is read from (`from_record`)."""
    return tuple((field, re.sub(r"(?<!^)([A-Z])", r"_\1", field).lower()) for field in model.model_fields)


class ErrorBody(Model):
    error: str
    message: str
    details: dict[str, Any] | None = None


class PageQuery(Query):
    limit: int = Field(20, ge=1, le=100)
    cursor: str | None = Field(None, max_length=512)


# A model shown only inside others (a list's item, an envelope's object) sets no example of
# its own, so the document does not show it alone; its module keeps one sample of it, as
# `_X_EXAMPLE` or, for a person, here, and every example that holds one uses that sample.
PERSON_EXAMPLE = {
    "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
    "username": "ada_streams",
    "displayName": "Ada Streams",
}


class PersonOut(Model):
    """The one shape of a person inside another object (mentions, moderators, winners, roles)."""

    userId: str
    username: str
    displayName: str


class UserOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "username": "ada_streams",
        "displayName": "Ada Streams",
        "avatarUrl": "https://volthub.example/avatarUrl",
        "bio": "Speedruns and chill every Friday.",
        "createdAt": "2026-03-14T18:30:00Z",
    }

    id: str
    username: str
    displayName: str
    avatarUrl: str | None
    bio: str
    createdAt: str


class CountOut(Model):
    """How many there are."""

    example = {"count": 3}

    count: int


class StatusOut(Model):
    example = {"status": "active"}

    status: str
