"""Tag slugs and the tag rules (volthub.protocol.streamtags): pure, property-tested."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol import streamtags
from volthub.protocol.streamtags import CHANNEL_TAG_LIMIT, STREAM_TAG_LIMIT, check_tags, slugify

SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
WARNINGS = sorted(streamtags.CONTENT_WARNING_SLUGS)


def test_the_spec_example_and_friends() -> None:
    assert slugify("Speed Run") == "speed-run"
    assert slugify("  speed   RUN!! ") == "speed-run"
    assert slugify("18+") == "18-plus"
    assert slugify("Q&A") == "q-and-a"
    assert slugify("Pokémon") == "pokemon"
    assert slugify("!!!") == ""


@given(st.text(max_size=80))
def test_a_slug_is_lower_ascii_words_joined_by_single_hyphens(text: str) -> None:
    slug = slugify(text)
    assert slug == "" or SLUG.match(slug)


@given(st.text(max_size=80))
def test_slugging_is_idempotent(text: str) -> None:
    assert slugify(slugify(text)) == slugify(text)


@given(st.text(max_size=40))
def test_case_and_surrounding_space_do_not_matter(text: str) -> None:
    assert slugify(f"  {text.upper()}\t") == slugify(text.lower()) or not text.isascii()


@given(st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9 ]{0,20}", fullmatch=True), max_size=15))
def test_the_limit_counts_distinct_slugs_that_are_not_warnings(raw: list[str]) -> None:
    checked = check_tags(raw, field="tags", limit=STREAM_TAG_LIMIT)
    distinct = list(dict.fromkeys(slugify(text) for text in raw))
    counted = [slug for slug in distinct if slug not in streamtags.CONTENT_WARNING_SLUGS]
    if len(counted) > STREAM_TAG_LIMIT:
        assert checked.problem is not None and checked.problem.code == "too_many_tags"
        assert checked.slugs == ()
    else:
        assert checked.problem is None and list(checked.slugs) == distinct


@given(st.lists(st.sampled_from(WARNINGS), max_size=10), st.integers(0, CHANNEL_TAG_LIMIT))
def test_content_warnings_never_count(warnings: list[str], plain: int) -> None:
    raw = [f"tag {i}" for i in range(plain)] + warnings
    checked = check_tags(raw, field="channelTags", limit=CHANNEL_TAG_LIMIT)
    assert checked.problem is None
    assert set(checked.slugs) >= set(warnings)


def test_one_over_the_limit_is_refused_with_the_count() -> None:
    checked = check_tags([f"t{i}" for i in range(8)], field="tags", limit=7)
    assert checked.problem is not None
    assert (checked.problem.field, checked.problem.limit, checked.problem.counted) == ("tags", 7, 8)
    assert check_tags([f"t{i}" for i in range(7)], field="tags", limit=7).problem is None


def test_repeats_collapse_before_counting() -> None:
    checked = check_tags(["Speed Run", "speed-run", "SPEED RUN"] + [f"t{i}" for i in range(6)], field="tags", limit=7)
    assert checked.problem is None and checked.slugs[0] == "speed-run" and len(checked.slugs) == 7


def test_an_empty_or_huge_tag_is_invalid() -> None:
    assert check_tags(["ok", "???"], field="tags", limit=7).problem.code == "tag_invalid"
    assert check_tags(["x" * 40], field="tags", limit=7).problem.code == "tag_invalid"


def test_the_vocabulary_has_the_ten_spec_warnings_and_unique_slugs() -> None:
    assert len(streamtags.CONTENT_WARNINGS) == 10
    assert {"flashing-lights", "18-plus", "horror-and-jump-scares", "sensitive-topics"} <= set(WARNINGS)
    slugs = [tag.slug for tag in streamtags.VOCABULARY]
    assert len(slugs) == len(set(slugs)) and all(SLUG.match(slug) for slug in slugs)
    assert {tag.tier for tag in streamtags.VOCABULARY} == {"session", "identity", "both"}


def test_content_warnings_come_from_both_lists_once_each() -> None:
    assert streamtags.content_warnings(["gambling", "chill"], ["18-plus", "gambling"]) == ["gambling", "18-plus"]
