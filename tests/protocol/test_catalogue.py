"""The one event catalogue against the spec's tables."""

from __future__ import annotations

import ast
import collections.abc
import inspect
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from volthub.protocol import catalogue

CATALOGUE_MODULE = "volthub.protocol.catalogue"
SANDBOX_MODULE = "volthub.http.blueprints.sandbox"

SPEC_EVENTS_API = {
    "stream.online",
    "stream.offline",
    "stream.update",
    "chat.message",
    "channel.follow",
    "channel.subscribe",
    "channel.subscription.gift",
    "channel.volts",
    "channel.raid",
    "channel.ban",
    "channel.unban",
    "channel.moderator.add",
    "channel.moderator.remove",
    "channel.channel_points_redemption",
    "channel.poll.begin",
    "channel.poll.end",
    "channel.giveaway.begin",
    "channel.giveaway.end",
    "channel.prediction.begin",
    "channel.prediction.lock",
    "channel.prediction.end",
    "channel.goal.progress",
    "channel.goal.completed",
    "channel.timer.update",
    "channel.hype_train.begin",
    "channel.hype_train.progress",
    "channel.hype_train.end",
}
WEBHOOK_ONLY = {
    "channel.subscription.end",
    "channel.cheer",
    "channel.update",
    "user.follow",
    "user.unfollow",
}
# Beyond the spec's Events API table: an app's owner also learns who authorised or revoked
# the app on their own Events API connections.
APP_OWNER_EVENTS = {"user.authorization.grant", "user.authorization.revoke"}


def test_events_api_names_are_the_spec_table() -> None:
    assert catalogue.EVENTS_API_EVENTS == SPEC_EVENTS_API | APP_OWNER_EVENTS


def test_webhook_names_are_the_spec_table() -> None:
    hype = {name for name in SPEC_EVENTS_API if "hype_train" in name}
    assert (SPEC_EVENTS_API - hype) | WEBHOOK_ONLY | APP_OWNER_EVENTS == catalogue.WEBHOOK_EVENTS


def test_names_are_unique() -> None:
    names = [entry.name for entry in catalogue.CATALOGUE]
    assert len(names) == len(set(names))


def test_hype_train_is_listed_but_never_fires() -> None:
    never = {entry.name for entry in catalogue.CATALOGUE if entry.never_fires}
    assert never == {"channel.hype_train.begin", "channel.hype_train.progress", "channel.hype_train.end"}
    assert not any(catalogue.delivered_over_events_api(name) for name in never)
    assert not any(catalogue.is_emitted(name) for name in never)


def test_delivered_over_events_api_is_the_events_api_table_less_never() -> None:
    assert catalogue.delivered_over_events_api("channel.follow")
    assert catalogue.delivered_over_events_api("channel.subscribe")  # the sandbox sends it today
    assert not catalogue.delivered_over_events_api("user.follow")  # webhooks only
    assert not catalogue.delivered_over_events_api("nope")


def test_public_events_are_stream_chat_and_interaction() -> None:
    groups = {catalogue.BY_NAME[name].group for name in catalogue.PUBLIC_EVENTS}
    assert groups == {"Stream", "Chat", "Interaction"}
    assert catalogue.is_public("chat.message") and catalogue.is_public("channel.poll.begin")
    assert not catalogue.is_public("channel.follow") and not catalogue.is_public("channel.ban")


def test_unknown_names() -> None:
    assert catalogue.unknown_events_api_names(["chat.message", "x", "user.follow", "x"]) == ["x", "user.follow"]


def test_document_describes_every_event() -> None:
    document = catalogue.document()
    assert document["groups"] == ["Stream", "Channel", "Interaction", "User", "Chat"]
    assert len(document["types"]) == len(catalogue.CATALOGUE)
    for entry in document["types"]:
        assert set(entry) == {
            "name",
            "group",
            "description",
            "transports",
            "emitted",
            "sandbox",
            "public",
            "aliasOf",
            "webhookScope",
            "fields",
        }
        if entry["emitted"]:
            assert entry["fields"], entry["name"]
        for field in entry["fields"]:
            assert set(field) == {"name", "type", "description", "optional"}
    follow = next(t for t in document["types"] if t["name"] == "channel.follow")
    assert [f["name"] for f in follow["fields"]][:4] == ["userId", "username", "displayName", "followedAt"]
    assert follow["transports"] == {"eventsApi": True, "webhooks": True}


# --- emitted: derived from the real producers ----------------------------------------------


def test_emitted_is_exactly_the_produced_events_and_their_aliases() -> None:
    emitted = {entry["name"] for entry in catalogue.document()["types"] if entry["emitted"]}
    aliases = {alias for alias, real in catalogue.ALIASES.items() if real in catalogue.PRODUCERS}
    assert emitted == set(catalogue.PRODUCERS) | aliases
    assert {"channel.follow", "user.follow", "user.authorization.revoke"} <= emitted
    assert ("channel.cheer" in emitted) == ("channel.volts" in emitted)
    assert not catalogue.is_emitted("nope")


def test_producers_name_real_events_and_modules() -> None:
    for name, module in catalogue.PRODUCERS.items():
        entry = catalogue.BY_NAME[name]
        assert entry.alias_of is None and not entry.never_fires, name
        assert module.startswith("volthub.") and _source(module).is_file(), module


def _catalogue_bindings(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """Names bound to the catalogue module, and names bound to one of its functions."""
    modules: set[str] = set()
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "volthub.protocol":
            modules.update(a.asname or a.name for a in node.names if a.name == "catalogue")
        elif isinstance(node, ast.ImportFrom) and node.module == CATALOGUE_MODULE:
            functions.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == CATALOGUE_MODULE and a.asname)
    return modules, functions


ROOT = Path(catalogue.__file__).resolve().parents[2]  # holds the volthub package


def _source(module: str) -> Path:
    """The file of a volthub module, found without importing anything."""
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _builders_called(module: str) -> set[str]:
    """The catalogue functions `module` calls, found by parsing its source (not importing)."""
    tree = ast.parse(_source(module).read_text(encoding="utf-8"))
    modules, functions = _catalogue_bindings(tree)
    called: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = node.func
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in modules:
            called.add(target.attr)
        elif isinstance(target, ast.Name) and target.id in functions:
            called.add(functions[target.id])
    return called


def builder_name(event: str) -> str:
    return event.replace(".", "_")


@pytest.mark.parametrize("event", sorted(catalogue.PRODUCERS))
def test_each_producer_really_calls_the_builder(event: str) -> None:
    module = catalogue.PRODUCERS[event]
    assert builder_name(event) in _builders_called(module), f"{module} never calls catalogue.{builder_name(event)}"


def _volthub_modules() -> list[str]:
    return [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted((ROOT / "volthub").rglob("*.py"))
    ]


def test_no_module_builds_an_event_without_being_its_producer() -> None:
    """The other direction: an unregistered producer would make `emitted` say false while
    the event is sent. The sandbox's calls are test events, not production."""
    builders = {builder_name(entry.name): entry.name for entry in catalogue.CATALOGUE}
    unregistered = [
        (module, builders[called])
        for module in _volthub_modules()
        if module not in (CATALOGUE_MODULE, SANDBOX_MODULE)
        for called in _builders_called(module)
        if called in builders and catalogue.PRODUCERS.get(builders[called]) != module
    ]
    assert unregistered == []


# --- builders: one per produced or sandboxed event, held to the documented fields ----------


def _sample(hint: Any) -> Any:
    """A value of the type `hint` (a builder parameter's annotation)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return _sample(next(arg for arg in args if arg is not type(None)))
    if origin is typing.Literal:
        return args[0]
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence):
        return [_sample(args[0])]
    if origin in (dict, collections.abc.Mapping):
        return {"key": "value"}
    if hint is catalogue.Person:
        return catalogue.Person("u1", "someone", "Someone")
    simple = {str: "text", bool: True, int: 7, float: 7.5}
    if hint in simple:
        return simple[hint]
    if isinstance(hint, type) and typing.get_type_hints(hint):  # a NamedTuple or dataclass
        return hint(**{name: _sample(h) for name, h in typing.get_type_hints(hint).items()})
    raise AssertionError(f"no sample for {hint!r}: teach _sample this type")


BUILT = sorted(
    entry.name for entry in catalogue.CATALOGUE if callable(getattr(catalogue, builder_name(entry.name), None))
)


def test_every_produced_or_sandboxed_event_has_a_builder() -> None:
    assert set(catalogue.PRODUCERS) | catalogue.SANDBOX_NAMES <= set(BUILT)
    assert not [name for name in BUILT if catalogue.BY_NAME[name].alias_of or catalogue.BY_NAME[name].never_fires]


@pytest.mark.parametrize("event", BUILT)
def test_builder_output_is_the_documented_fields(event: str) -> None:
    builder = getattr(catalogue, builder_name(event))
    hints = typing.get_type_hints(builder)
    parameters = inspect.signature(builder).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.name in hints for p in parameters), event
    documented = {field.name for field in catalogue.BY_NAME[event].fields}
    required = {field.name for field in catalogue.BY_NAME[event].fields if not field.optional}
    minimal = builder(**{p.name: _sample(hints[p.name]) for p in parameters if p.default is p.empty})
    full = builder(**{p.name: _sample(hints[p.name]) for p in parameters})
    for data in (minimal, full):
        assert required <= set(data), f"{event}: missing {sorted(required - set(data))}"
        assert set(data) <= documented, f"{event}: undocumented {sorted(set(data) - documented)}"
    if "isTest" in documented and "is_test" in hints:
        assert "isTest" not in minimal and full["isTest"] is True


def test_person_is_the_one_person_shape() -> None:
    person = catalogue.Person("u1", "someone", "Someone")
    assert person.fields() == {"userId": "u1", "username": "someone", "displayName": "Someone"}
    assert catalogue.channel_follow(follower=person, followed_at="t") == {**person.fields(), "followedAt": "t"}


# --- the sandbox's table -------------------------------------------------------------------


def test_sandbox_flag_is_every_emitted_event() -> None:
    flagged = {entry["name"] for entry in catalogue.document()["types"] if entry["sandbox"]}
    emitted = {entry.name for entry in catalogue.CATALOGUE if catalogue.is_emitted(entry.name)}
    assert flagged == emitted and set(catalogue.SANDBOX_EVENTS.values()) == catalogue.SANDBOX_NAMES <= flagged
    assert set(catalogue.SANDBOX_EVENTS) == {
        "subscription",
        "gift_subscription",
        "follow",
        "volt_tip",
        "raid",
        "chat_message",
    }
    assert all(catalogue.delivered_over_events_api(name) for name in catalogue.SANDBOX_NAMES)
