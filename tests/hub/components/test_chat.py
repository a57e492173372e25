"""The sans-IO chat rules: validators, mentions, emotes, settings patches, decisions.\n\nThe component built on them is tested in test_chat_component.py."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.hub.components import chat_rules as rules
from volthub.hub.components.chat_rules import ChatSettings, Standing

NOW = 1_800_000_000_000

# Printable text: letters, digits, punctuation, symbols, spaces (no control characters).
printable = st.characters(blacklist_categories=("Cc", "Cs"))


# --- message, snippet, effect, colour ----------------------------------------------------------


@given(st.text(printable, min_size=1, max_size=rules.MESSAGE_MAX).filter(lambda s: any(map(rules.is_visible, s))))
def test_messages_up_to_500_code_points_pass_unchanged(text):
    assert rules.check_message(text) == text


@pytest.mark.parametrize(
    ("check", "most", "refusal"),
    [(rules.check_message, rules.MESSAGE_MAX, "at most 500"), (rules.check_snippet, rules.SNIPPET_MAX, "at most 100")],
    ids=["message", "snippet"],
)
@given(data=st.data())
def test_messages_and_snippets_over_their_length_are_refused(check, most, refusal, data):
    text = data.draw(st.text(printable, min_size=most + 1, max_size=most + 40))
    with pytest.raises(ValueError, match=refusal):
        check(text)


def test_the_500_boundary_counts_code_points_not_bytes_or_utf16_units():
    astral = "\U0001f600"  # one code point, two UTF-16 units, four UTF-8 bytes
    assert rules.check_message(astral * 500) == astral * 500
    with pytest.raises(ValueError):
        rules.check_message(astral * 501)
    assert rules.check_message("a" * 500)
    with pytest.raises(ValueError):
        rules.check_message("a" * 501)


@given(st.text(st.sampled_from(" \t\n\r\u00a0\u2003"), max_size=20))
def test_blank_messages_are_refused(text):
    with pytest.raises(ValueError, match="blank"):
        rules.check_message(text)


# Zero-width space, non-joiner, joiner, word joiner, BOM, Hangul filler, braille blank,
# variation selector 16, combining grapheme joiner: each draws nothing on its own.
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u3164\u2800\ufe0f\u034f"


@given(st.text(st.sampled_from(INVISIBLE + " \u00a0"), min_size=1, max_size=20))
def test_messages_of_only_invisible_characters_are_refused_as_blank(text):
    with pytest.raises(ValueError, match="blank"):
        rules.check_message(text)


def test_invisible_characters_beside_visible_ones_are_kept():
    assert rules.check_message("hi\u200b there") == "hi\u200b there"
    assert rules.check_message("\u2764\ufe0f") == "\u2764\ufe0f"  # a heart with its emoji selector
    assert rules.check_message("\U0001f468\u200d\U0001f469") == "\U0001f468\u200d\U0001f469"


@pytest.mark.parametrize("bad", ["a\x00b", "bell\x07", "esc\x1b[31m"])
def test_control_characters_are_refused(bad):
    with pytest.raises(ValueError, match="control"):
        rules.check_message(bad)


def test_tabs_and_newlines_are_allowed():
    assert rules.check_message("line one\nline\ttwo")


@given(st.text(printable, max_size=rules.SNIPPET_MAX))
def test_snippets_up_to_100_pass(text):
    assert rules.check_snippet(text) == text


@given(st.sampled_from(rules.EFFECTS))
def test_the_four_effects_are_accepted(effect):
    assert rules.check_effect(effect) == effect


@given(st.text(max_size=12).filter(lambda s: s not in rules.EFFECTS))
def test_anything_else_is_not_an_effect(value):
    with pytest.raises(ValueError, match="one of"):
        rules.check_effect(value)


def test_effect_set_is_exactly_the_spec_list():
    assert set(rules.EFFECTS) == {"glow", "galaxy", "rainbow", "gigantify"}


@given(st.text("0123456789abcdefABCDEF", min_size=6, max_size=6))
def test_colours_of_shape_rrggbb_pass_and_come_back_lower_case(digits):
    assert rules.normalize_color("#" + digits) == "#" + digits.lower()


@given(st.text(max_size=10))
def test_other_colour_shapes_are_refused(value):
    if re.fullmatch(r"#[0-9a-fA-F]{6}", value):
        return
    with pytest.raises(ValueError, match="#rrggbb"):
        rules.normalize_color(value)


@pytest.mark.parametrize("bad", ["#abc", "abcdef", "#abcdefa", "#ggggggg", "#12345g", "red", "#12 456", "＃123456"])
def test_named_bad_colours(bad):
    with pytest.raises(ValueError):
        rules.normalize_color(bad)


# --- mentions ---------------------------------------------------------------------------------


def test_mentions_are_found_in_order_once_each_whatever_the_case():
    text = "hi @Alice and @bob_2, also @ALICE again; mail me@example.com; @x is too short"
    assert rules.extract_mentions(text) == ["Alice", "bob_2"]


def test_mention_at_start_and_after_punctuation():
    assert rules.extract_mentions("@carol,(@dave) @erin!") == ["carol", "dave", "erin"]


def test_mentions_longer_than_a_username_are_not_mentions():
    assert rules.extract_mentions("@" + "a" * 26) == []


@given(st.text(printable, max_size=200))
def test_every_extracted_mention_is_a_possible_username(text):
    for name in rules.extract_mentions(text):
        assert re.fullmatch(r"[A-Za-z0-9_]{3,25}", name)
        assert "@" + name in text


# --- emotes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        ":volt_hype:",
        ":a1: :b2:",
        ":pog::pog:",
        "\U0001f600",
        "\U0001f44d\U0001f3fd",
        "\u2764\ufe0f :gg:",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    ],
)
def test_emote_only_messages(text):
    assert rules.is_emote_only(text)


@pytest.mark.parametrize("text", ["hello", ":volt_hype: hello", ":a:", "::", ": gg :", "1", "   "])
def test_not_emote_only(text):
    assert not rules.is_emote_only(text)


# --- settings patches -------------------------------------------------------------------------


def test_fresh_settings_are_all_off():
    assert ChatSettings().as_api() == {
        "slowMode": False,
        "slowModeSeconds": 0,
        "followersOnly": False,
        "subscribersOnly": False,
        "emoteOnly": False,
    }


def test_patch_is_partial():
    current = ChatSettings(followers_only=True, slow_mode=True, slow_mode_seconds=10)
    patched = rules.apply_settings_patch(current, {"emoteOnly": True})
    assert patched == ChatSettings(followers_only=True, slow_mode=True, slow_mode_seconds=10, emote_only=True)


@pytest.mark.parametrize(
    ("current", "patch", "expected"),
    [
        (ChatSettings(), {"slowMode": True}, (True, 30)),
        (ChatSettings(), {"slowModeSeconds": 5}, (True, 5)),
        (ChatSettings(slow_mode=True, slow_mode_seconds=5), {"slowModeSeconds": 0}, (False, 0)),
        (ChatSettings(slow_mode=True, slow_mode_seconds=5), {"slowMode": False}, (False, 0)),
        (ChatSettings(slow_mode=True, slow_mode_seconds=5), {"slowMode": True}, (True, 5)),
        (ChatSettings(), {"slowMode": True, "slowModeSeconds": 3600}, (True, 3600)),
        (ChatSettings(), {"slowMode": False, "slowModeSeconds": 0}, (False, 0)),
    ],
)
def test_slow_mode_rule(current, patch, expected):
    patched = rules.apply_settings_patch(current, patch)
    assert (patched.slow_mode, patched.slow_mode_seconds) == expected


@pytest.mark.parametrize(
    "patch",
    [
        {"slowMode": True, "slowModeSeconds": 0},
        {"slowMode": False, "slowModeSeconds": 9},
        {"slowModeSeconds": 3601},
        {"slowModeSeconds": -1},
    ],
)
def test_contradicting_or_out_of_range_slow_mode_is_refused(patch):
    with pytest.raises(rules.SettingsError) as caught:
        rules.apply_settings_patch(ChatSettings(), patch)
    assert caught.value.field == "slowModeSeconds"


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "slowMode": st.booleans(),
            "slowModeSeconds": st.integers(0, 3600),
            "followersOnly": st.booleans(),
            "subscribersOnly": st.booleans(),
            "emoteOnly": st.booleans(),
        },
    )
)
def test_any_accepted_patch_keeps_the_slow_mode_invariant(patch):
    try:
        patched = rules.apply_settings_patch(ChatSettings(), patch)
    except rules.SettingsError:
        return
    assert patched.slow_mode == (patched.slow_mode_seconds > 0)
    for key in ("followersOnly", "subscribersOnly", "emoteOnly"):
        if key in patch:
            assert patched.as_api()[key] == patch[key]


# --- decisions --------------------------------------------------------------------------------


def viewer(**kw):
    return Standing(user_id="v", username="viewer", display_name="Viewer", **kw)


def test_banned_and_timed_out():
    assert rules.check_standing(viewer(banned=True), NOW).code == "banned"
    refusal = rules.check_standing(viewer(timeout_ends_at=NOW + 90_500), NOW)
    assert refusal.code == "timed_out" and refusal.details["remainingSeconds"] == 91
    assert rules.check_standing(viewer(timeout_ends_at=NOW), NOW) is None  # ended


def test_the_broadcaster_is_never_refused_for_a_ban():
    assert rules.check_standing(viewer(is_broadcaster=True, banned=True), NOW) is None


ALL_ON = ChatSettings(slow_mode=True, slow_mode_seconds=10, followers_only=True, subscribers_only=True, emote_only=True)


@pytest.mark.parametrize(
    ("settings", "who", "code"),
    [
        (ChatSettings(followers_only=True), viewer(), "followers_only"),
        (ChatSettings(subscribers_only=True), viewer(is_follower=True), "subscribers_only"),
        (ChatSettings(emote_only=True), viewer(), "emote_only"),
        (ChatSettings(followers_only=True), viewer(is_follower=True), None),
        (ChatSettings(subscribers_only=True), viewer(subscriber_months=3), None),
        (ALL_ON, viewer(is_moderator=True), None),
        (ALL_ON, viewer(is_broadcaster=True), None),
        (ALL_ON, viewer(is_vip=True), "followers_only"),  # VIPs are not exempt
    ],
)
def test_modes(settings, who, code):
    refusal = rules.check_modes(settings, who, "hello", NOW, None)
    assert (refusal.code if refusal else None) == code


def test_slow_mode_counts_from_the_previous_message():
    settings = ChatSettings(slow_mode=True, slow_mode_seconds=10)
    refusal = rules.check_modes(settings, viewer(), "hi", NOW, NOW - 2_500)
    assert refusal.code == "slow_mode" and refusal.details["waitSeconds"] == 8
    assert rules.check_modes(settings, viewer(), "hi", NOW, NOW - 10_000) is None
    assert rules.check_modes(settings, viewer(), "hi", NOW, None) is None
    assert rules.needs_last_message(settings, viewer())
    assert not rules.needs_last_message(settings, viewer(is_moderator=True))


def test_badges_follow_roles():
    who = viewer(is_moderator=True, is_vip=True, subscriber_months=4)
    assert rules.badges(who) == ["moderator", "vip", "subscriber"]
    assert rules.badges(Standing("b", "b", "B", is_broadcaster=True)) == ["broadcaster"]


@pytest.mark.parametrize(
    ("moderator", "target", "action", "code"),
    [
        (viewer(is_moderator=True), Standing("b", "b", "B", is_broadcaster=True), "ban", "cannot_moderate_broadcaster"),
        (viewer(is_moderator=True), Standing("m", "m", "M", is_moderator=True), "timeout", "cannot_moderate_moderator"),
        (Standing("b", "b", "B", is_broadcaster=True), Standing("m", "m", "M", is_moderator=True), "ban", None),
        (viewer(is_moderator=True), viewer(is_moderator=True), "ban", "cannot_moderate_self"),
        (viewer(is_moderator=True), viewer(is_moderator=True), "delete", None),
        (viewer(is_moderator=True), Standing("x", "x", "X"), "ban", None),
    ],
)
def test_moderation_targets(moderator, target, action, code):
    refusal = rules.check_moderation_target(moderator, target, action)
    assert (refusal.code if refusal else None) == code


def test_only_broadcaster_and_moderators_moderate():
    assert rules.check_moderator(viewer()).code == "not_moderator"
    assert rules.check_moderator(viewer(is_vip=True)).code == "not_moderator"
    assert rules.check_moderator(viewer(is_moderator=True)) is None
    assert rules.check_moderator(viewer(is_broadcaster=True)) is None


@given(st.integers(1, rules.TIMEOUT_MAX_SECONDS))
def test_timeouts_within_bounds_end_when_expected(seconds):
    assert rules.timeout_ends_at(NOW, seconds) == NOW + seconds * 1000


@pytest.mark.parametrize("seconds", [0, -5, rules.TIMEOUT_MAX_SECONDS + 1])
def test_timeouts_outside_bounds_are_refused(seconds):
    with pytest.raises(ValueError):
        rules.timeout_ends_at(NOW, seconds)
