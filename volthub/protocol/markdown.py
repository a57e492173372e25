"""Markdown to safe HTML for journals: markdown-it-py (CommonMark, raw HTML off) and then
nh3 (the ammonia sanitiser) with an allow-list. No hand-written HTML filtering.

Links get `rel="nofollow noopener noreferrer"`; only http, https and mailto links survive.
Images are kept only when they point at this server's uploaded images (`/api/media/…`,
after dot segments, percent-encoded dots and backslashes are resolved as a browser
would), so a journal cannot make its readers' browsers fetch third-party trackers or other
paths of this server.

The renderer's cost is bounded before it runs (`check`): at most BODY_MAX characters,
blocks nested at most NESTING_MAX deep (deeper is kept as text), and at most
INLINE_MARKUP_MAX of the characters that make inline parsing quadratic (`[`, `*`, `_`,
`<`) in one paragraph, heading or table cell. A body is rendered once, when it is written
(`render_post`), not on every read.
"""

from __future__ import annotations

import html
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote

import nh3
from markdown_it import MarkdownIt

BODY_MAX = 50_000
NESTING_MAX = 20
INLINE_MARKUP_MAX = 500


def _parser() -> MarkdownIt:
    options = {"html": False, "linkify": False, "typographer": False, "maxNesting": NESTING_MAX}
    return MarkdownIt("commonmark", options).enable("table").enable("strikethrough")


_PARSER = _parser()
# The block structure only (linear cost): where the inline runs are, for `check`.
_BLOCKS = _parser().disable("inline")
_COSTLY = re.compile(r"[\[*_<]")


class TooCostly(ValueError):
    """The body would cost too much to render; the message says which bound it passes."""


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


_MEDIA_PATH = re.compile(r"/api/media/[A-Za-z0-9][A-Za-z0-9._-]*")


def media_src(value: str) -> str | None:
    """The image path as a browser resolves it, when that is one of this server's uploaded
    images; None for anything else (other paths, other hosts, schemes, queries)."""
    path = unquote(value).replace("\\", "/")
    if not path.startswith("/") or path.startswith("//") or "?" in path or "#" in path:
        return None
    resolved = posixpath.normpath(path)
    return resolved if _MEDIA_PATH.fullmatch(resolved) else None


def _keep(tag: str, attribute: str, value: str) -> str | None:
    if tag == "img" and attribute == "src":
        return media_src(value)
    return value


def check(markdown: str) -> None:
    """Raise TooCostly when rendering `markdown` would pass a bound (see the module's text).
    Costs time linear in its length (a block parse): call it off the event loop."""
    if len(markdown) > BODY_MAX:
        raise TooCostly(f"body is at most {BODY_MAX} characters")
    for token in _BLOCKS.parse(markdown):
        if token.type == "inline" and len(_COSTLY.findall(token.content)) > INLINE_MARKUP_MAX:
            raise TooCostly(
                f"a paragraph, heading or table cell holds at most {INLINE_MARKUP_MAX} of the characters [ * _ <"
            )


@dataclass(frozen=True)
class Rendered:
    html: str
    excerpt: str


def render_post(markdown: str) -> Rendered:
    """Check the cost bounds, then render once: the sanitised HTML and the excerpt. Takes
    up to a fraction of a second for the largest bodies: run it in a worker thread."""
    check(markdown)
    raw = _PARSER.render(markdown)
    return Rendered(_clean(raw), _excerpt_of(raw))


def render(markdown: str) -> str:
    """Sanitised HTML of `markdown` (no cost check: for trusted or small text)."""
    return _clean(_PARSER.render(markdown))


def _clean(rendered: str) -> str:
    return nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_keep,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
        strip_comments=True,
    )


def excerpt(markdown: str, length: int = 200) -> str:
    """Plain text of the first part of a post (for lists)."""
    return _excerpt_of(_PARSER.render(markdown), length)


def _excerpt_of(rendered: str, length: int = 200) -> str:
    text = " ".join(nh3.clean(rendered, tags=set()).split())
    text = html.unescape(text)
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"
