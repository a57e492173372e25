"""Journals: a user's Markdown posts; drafts until published.

Readers: `GET /api/users/:username/journals` (published, newest first, cursor list) and
`/api/users/:username/journals/:slug` (published only). The author: `GET /api/journals`
(journal:read, drafts included), writes with journal:write. Bodies are Markdown (CommonMark
with tables and strikethrough, raw HTML off) served both as written (`body`) and as
sanitised HTML (`html`). Images: `POST /api/journals/:slug/images` with the image as the
body (PNG, JPEG, GIF or WebP by content, at most `[media] journal_image_max_bytes`); use the
returned `markdown` in the body. Only this server's images are shown in `html`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from quart import Blueprint, Response
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.http.schemas import PERSON_EXAMPLE, Body, Model, PageQuery
from volthub.http.uploads import ACCEPTED, read_image
from volthub.protocol import markdown
from volthub.protocol.images import media_path
from volthub.services.journals import Journal, Journals, check_slug

blueprint = Blueprint("journals", __name__)

TITLE_MAX = 150
BODY_MAX = markdown.BODY_MAX
BODY_RULES = (
    f"Markdown; at most {markdown.INLINE_MARKUP_MAX} of the characters [ * _ < in one paragraph, heading or"
    " table cell (400 validation_error, field body); rendered once when written"
)


def journals() -> Journals:
    return runtime().services.journals


class AuthorOut(Model):
    userId: str
    username: str
    displayName: str


class JournalSummary(Model):
    id: str
    slug: str
    title: str
    status: str = Field(description="draft | published")
    excerpt: str
    author: AuthorOut
    createdAt: str
    updatedAt: str
    publishedAt: str | None


class JournalOut(JournalSummary):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "slug": "speedrun-club",
        "title": "Friday night speedrun",
        "status": "active",
        "excerpt": "Tonight we race any%.",
        "author": PERSON_EXAMPLE,
        "createdAt": "2026-03-14T18:30:00Z",
        "updatedAt": "2026-03-14T18:30:00Z",
        "publishedAt": "2026-03-14T18:30:00Z",
        "body": "Tonight we race **any%**.",
        "html": "<p>Tonight we race <strong>any%</strong>.</p>",
    }

    body: str = Field(description="Markdown as written")
    html: str = Field(description="the body rendered to sanitised HTML")


def summary(journal: Journal) -> JournalSummary:
    return JournalSummary.from_record(journal, **_given(journal))


def full(journal: Journal) -> JournalOut:
    return JournalOut.from_record(journal, **_given(journal), html=journal.html or "")


def _given(journal: Journal) -> dict[str, Any]:
    """What a journal's answer does not read by the naming rule: an excerpt not made yet
    is empty, and the author is a nested object."""
    return {"excerpt": journal.excerpt or "", "author": AuthorOut.from_record(journal)}


class JournalList(Model):
    example = {
        "items": [
            {
                "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
                "slug": "speedrun-club",
                "title": "Friday night speedrun",
                "status": "active",
                "excerpt": "Tonight we race any%.",
                "author": PERSON_EXAMPLE,
                "createdAt": "2026-03-14T18:30:00Z",
                "updatedAt": "2026-03-14T18:30:00Z",
                "publishedAt": "2026-03-14T18:30:00Z",
            }
        ],
        "nextCursor": None,
    }

    items: list[JournalSummary]
    nextCursor: str | None


def _title(value: str) -> str:
    if not value.strip():
        raise ValueError("title must not be blank")
    return value.strip()


class CreateBody(Body):
    example = {"title": "Friday night speedrun", "body": "", "slug": "speedrun-club", "publish": False}

    title: str = Field(min_length=1, max_length=TITLE_MAX)
    body: str = Field("", max_length=BODY_MAX, description=BODY_RULES)
    slug: str | None = Field(None, description="made from the title when omitted")
    publish: bool = Field(False, description="publish at once instead of saving a draft")

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        return _title(value)

    @field_validator("slug")
    @classmethod
    def _slug(cls, value: str | None) -> str | None:
        return None if value is None else check_slug(value)


class UpdateBody(Body):
    example = {"title": "Friday night speedrun", "body": "Tonight we race **any%**.", "slug": "speedrun-club"}

    title: str = Field(None, min_length=1, max_length=TITLE_MAX)  # type: ignore[assignment]
    body: str = Field(None, max_length=BODY_MAX, description=BODY_RULES)  # type: ignore[assignment]
    slug: str = Field(None)  # type: ignore[assignment]

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        return _title(value)

    @field_validator("slug")
    @classmethod
    def _slug(cls, value: str) -> str:
        return check_slug(value)


class ImageOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "url": "https://volthub.example/url",
        "contentType": "image/png",
        "sizeBytes": 1,
        "markdown": "![overlay](/api/media/0b7e2a4c-5d1f-4e8a-9c3b-5e1a3c7d9f20)",
    }

    id: str
    url: str
    contentType: str
    sizeBytes: int
    markdown: str = Field(description="paste into the body to show the image")


# --- public ------------------------------------------------------------------------------------


@blueprint.get("/api/users/<username>/journals")
@access.public
@tag(["Journals"])
@error_responses(404)
@validate_querystring(PageQuery)
@validate_response(JournalList)
async def public_list(username: str, query_args: PageQuery) -> JournalList:
    """A user's published journals, newest first (404 for an unknown user)."""
    found, next_cursor = await journals().public_page(username, query_args.limit, query_args.cursor)
    return JournalList(items=[summary(j) for j in found], nextCursor=next_cursor)


@blueprint.get("/api/users/<username>/journals/<slug>")
@access.public
@tag(["Journals"])
@error_responses(404)
@validate_response(JournalOut)
async def public_read(username: str, slug: str) -> JournalOut:
    """One published journal (a draft is 404 here)."""
    return full(await journals().public(username, slug))


# --- the author ---------------------------------------------------------------------------------


@blueprint.get("/api/journals")
@access.token("journal:read")
@tag(["Journals"])
@validate_querystring(PageQuery)
@validate_response(JournalList)
async def my_journals(query_args: PageQuery) -> JournalList:
    """Your journals, drafts included, most recently changed first."""
    found, next_cursor = await journals().page_of(
        access.principal().user_id, drafts=True, limit=query_args.limit, cursor=query_args.cursor
    )
    return JournalList(items=[summary(j) for j in found], nextCursor=next_cursor)


@blueprint.post("/api/journals")
@access.token("journal:write")
@access.large_body
@tag(["Journals"])
@error_responses(409)
@validate_request(CreateBody)
@validate_response(JournalOut, 201)
async def create(data: CreateBody) -> tuple[JournalOut, int]:
    """A new draft (or published at once with `publish: true`). 409 `slug_taken`."""
    me = access.principal().user_id
    journal = await journals().create(me, data.title, data.body, data.slug)
    if data.publish:
        journal = await journals().publish(me, journal.slug)
    return full(journal), 201


@blueprint.get("/api/journals/<slug>")
@access.token("journal:read")
@tag(["Journals"])
@error_responses(404)
@validate_response(JournalOut)
async def read_mine(slug: str) -> JournalOut:
    """One of your journals, draft or published."""
    return full(await journals().mine(access.principal().user_id, slug))


@blueprint.put("/api/journals/<slug>")
@access.token("journal:write")
@access.large_body
@tag(["Journals"])
@error_responses(404, 409)
@validate_request(UpdateBody)
@validate_response(JournalOut)
async def update(slug: str, data: UpdateBody) -> JournalOut:
    """Change title, body or slug; omitted fields stay, null is refused. Changing the slug
    of a published journal changes its address."""
    sent = data.model_dump(exclude_unset=True)
    for name, value in sent.items():
        if value is None:
            raise ApiError(400, "validation_error", f"{name} cannot be null", {"field": name})
    return full(await journals().update(access.principal().user_id, slug, sent))


@blueprint.delete("/api/journals/<slug>")
@access.token("journal:write")
@tag(["Journals"])
@error_responses(404)
async def delete(slug: str) -> Response:
    """Delete a journal and its images."""
    await journals().delete(access.principal().user_id, slug)
    return Response("", status=204)


@blueprint.post("/api/journals/<slug>/publish")
@access.token("journal:write")
@tag(["Journals"])
@error_responses(404)
@validate_response(JournalOut)
async def publish(slug: str) -> JournalOut:
    """Publish a draft; publishing again keeps the first publication time."""
    return full(await journals().publish(access.principal().user_id, slug))


@blueprint.post("/api/journals/<slug>/images")
@access.token("journal:write")
@access.large_body
@access.accepts(*ACCEPTED)
@tag(["Journals"])
@error_responses(404, 409, 413, 415)
@validate_response(ImageOut, 201)
async def upload_image(slug: str) -> tuple[ImageOut, int]:
    """Upload an image for a journal: the body is the image. 413 `file_too_large`, 415
    `unsupported_image` / `content_type_mismatch`, 409 `too_many_images` (50); a refused
    upload stores nothing."""
    me = access.principal().user_id
    await journals().mine(me, slug)  # 404 before reading the body
    image = await read_image(journals().image_max_bytes, journals().image_max_side)
    upload = await journals().add_image(me, slug, image)
    url = media_path(upload.media.id)
    return (
        ImageOut(
            id=upload.media.id,
            url=url,
            contentType=upload.media.content_type,
            sizeBytes=upload.media.size_bytes,
            markdown=f"![]({url})",
        ),
        201,
    )
