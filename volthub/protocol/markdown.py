"""Markdown to safe HTML for journals: markdown-it-py (CommonMark, raw HTML off) and then
nh3 (the ammonia sanitiser) with an allow-list. No hand-written HTML filtering.

Links get `rel="nofollow noopener noreferrer"`; only http, https and mailto links survive.
Images are kept only when they point at this server's uploaded images (`/api/media/…`),
so a journal cannot make its readers' browsers fetch third-party trackers.
"""

from __future__ import annotations

import html

import nh3
from markdown_it import MarkdownIt

_PARSER = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    .enable("table")
    .enable("strikethrough")
)

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "img", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
}
MEDIA_PREFIX = "/api/media/"


def _keep(tag: str, attribute: str, value: str) -> str | None:
    if tag == "img" and attribute == "src" and not value.startswith(MEDIA_PREFIX):
        return None
    return value


def render(markdown: str) -> str:
    """Sanitised HTML of `markdown`."""
    return nh3.clean(
        _PARSER.render(markdown),
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_keep,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
        strip_comments=True,
    )


def excerpt(markdown: str, length: int = 200) -> str:
    """Plain text of the first part of a post (for lists)."""
    text = " ".join(nh3.clean(_PARSER.render(markdown), tags=set()).split())
    text = html.unescape(text)
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"
