from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from volthub.http.consent_page import (
    CONTENT_SECURITY_POLICY,
    OAUTH_PARAMS,
    SECURITY_HEADERS,
    render_consent_page,
    render_error_page,
)
from volthub.protocol.oauth.scopes import group_for_consent

VOID = {"meta", "input", "img", "br", "hr", "link"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    ancestors: list[Element]
    text: str = ""
    children: list[Element] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


class Tree(HTMLParser):
    """Just enough DOM to assert on structure the way a browser would see it."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.stack: list[Element] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, dict(attrs), list(self.stack))
        assert len(dict(attrs)) == len(attrs), f"duplicate attribute on <{tag}>"
        self.elements.append(el)
        if self.stack:
            self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1].tag == tag, f"unbalanced </{tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        for el in self.stack:
            el.text += data

    def by_id(self, id_: str) -> Element:
        found = [e for e in self.elements if e.attrs.get("id") == id_]
        assert len(found) == 1, f"#{id_}: {len(found)} elements"
        return found[0]

    def has_id(self, id_: str) -> bool:
        return any(e.attrs.get("id") == id_ for e in self.elements)

    def select(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        return [e for e in self.elements if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)]


APP: dict[str, Any] = {
    "name": "Stream Buddy",
    "description": "Chat overlay and alerts.",
    "logoUrl": "https://cdn.example.com/logo.png",
    "reviewed": True,
    "clientId": "client_123",
}
PARAMS = {
    "response_type": "code",
    "client_id": "client_123",
    "redirect_uri": "https://app.example.com/cb?tenant=a&b=2",
    "scope": "chat:read chat:moderate streams:key:read",
    "state": "st<>\"'&ate",
    "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    "code_challenge_method": "S256",
}
USER = {"username": "alice", "displayName": "Alice A."}
GROUPS = group_for_consent(PARAMS["scope"].split())


def consent(**overrides: Any) -> str:
    kwargs: dict[str, Any] = {
        "app": APP,
        "scope_groups": GROUPS,
        "params": PARAMS,
        "user": USER,
        "csrf_token": "csrf-tok",
        "error": None,
    }
    kwargs.update(overrides)
    return render_consent_page(**kwargs)


def hidden_fields(form: Element) -> dict[str, str | None]:
    inputs = [c for c in form_descendants(form) if c.tag == "input" and c.attrs.get("type") == "hidden"]
    names = [i.attrs["name"] for i in inputs]
    assert len(names) == len(set(names)), "duplicate hidden field"
    return {i.attrs["name"]: i.attrs.get("value") for i in inputs}  # type: ignore[misc]


def form_descendants(form: Element) -> list[Element]:
    out: list[Element] = []
    for c in form.children:
        out.append(c)
        out.extend(form_descendants(c))
    return out


def form_of(tree: Tree, el: Element) -> Element:
    forms = [a for a in el.ancestors if a.tag == "form"]
    assert len(forms) == 1
    return forms[0]


def assert_well_formed_page(source: str) -> Tree:
    assert source.startswith("<!doctype html>")
    tree = Tree(source)
    assert not tree.stack, "unclosed elements"
    html_el = tree.select("html")[0]
    assert html_el.attrs.get("lang") == "en"
    ids = [e.attrs["id"] for e in tree.elements if "id" in e.attrs]
    assert len(ids) == len(set(ids)), "duplicate ids"
    # No scripts, no external stylesheets or fonts, no inline event handlers or styles.
    assert not tree.select("script") and not tree.select("link") and not tree.select("iframe")
    for e in tree.elements:
        assert not any(a.startswith("on") for a in e.attrs), e
        assert "style" not in e.attrs, e
    assert len(tree.select("h1")) == 1
    assert tree.select("meta") and any(m.attrs.get("name") == "viewport" for m in tree.select("meta"))
    return tree


# --- signed in: consent -------------------------------------------------------------------


def test_consent_page_structure() -> None:
    tree = assert_well_formed_page(consent())
    assert tree.by_id("app-name").text == "Stream Buddy"
    assert "Reviewed by volthub" in tree.by_id("reviewed-badge").text
    assert not tree.has_id("unreviewed-badge")
    assert "Signed in as Alice A. (@alice)" in tree.by_id("signed-in").text
    assert not tree.has_id("login-username") and not tree.has_id("error")

    approve, deny = tree.by_id("approve"), tree.by_id("deny")
    assert (approve.tag, approve.attrs["type"], approve.attrs["name"], approve.attrs["value"]) == (
        "button", "submit", "decision", "approve",
    )  # fmt: skip
    assert (deny.attrs["type"], deny.attrs["name"], deny.attrs["value"]) == ("submit", "decision", "deny")
    form = form_of(tree, approve)
    assert form is form_of(tree, deny)
    assert form.attrs["method"] == "post" and form.attrs["action"] == "/oauth/authorize"
    assert len(tree.select("form")) == 1


def test_consent_form_carries_every_oauth_param_and_csrf_verbatim() -> None:
    tree = Tree(consent())
    fields = hidden_fields(form_of(tree, tree.by_id("approve")))
    assert fields == {"action": "consent", "csrf_token": "csrf-tok", **PARAMS}


def test_consent_form_ignores_unknown_and_missing_params() -> None:
    params = {"response_type": "code", "client_id": "c", "state": None, "evil": "x", "decision": "approve"}
    tree = Tree(consent(params=params))
    fields = hidden_fields(form_of(tree, tree.by_id("approve")))
    assert fields == {"action": "consent", "csrf_token": "csrf-tok", "response_type": "code", "client_id": "c"}
    assert not tree.has_id("redirect-target")


def test_scopes_grouped_and_sensitive_marked() -> None:
    tree = Tree(consent())
    scopes = tree.select("li", "scope")
    assert [s.attrs["data-scope"] for s in scopes] == ["chat:read", "chat:moderate", "stream:key"]
    sensitive = {s.attrs["data-scope"] for s in tree.select(cls="sensitive") if "scope" in s.classes}
    assert sensitive == {"chat:moderate", "stream:key"}
    for s in scopes:
        labelled = "Sensitive" in s.text
        assert labelled == ("sensitive" in s.classes)
    assert [h.text for h in tree.select("h3")] == ["Chat", "Stream"]
    assert "2 sensitive permissions" in tree.by_id("sensitive-notice").text


def test_no_sensitive_notice_without_sensitive_scopes() -> None:
    tree = Tree(consent(scope_groups=group_for_consent(["chat:read"])))
    assert not tree.has_id("sensitive-notice")
    assert not tree.select(cls="sensitive")


def test_empty_scope_request_still_lists_baseline() -> None:
    tree = Tree(consent(scope_groups=[]))
    assert not tree.select(cls="scope")
    assert "public profile" in tree.select("li", "baseline")[0].text


def test_unreviewed_app_warning() -> None:
    tree = Tree(consent(app={**APP, "reviewed": False}))
    assert "Unreviewed app" in tree.by_id("unreviewed-badge").text
    assert not tree.has_id("reviewed-badge")
    # Anything but a real True is unreviewed.
    assert Tree(consent(app={**APP, "reviewed": "yes"})).has_id("unreviewed-badge")


def test_signed_in_without_display_name() -> None:
    tree = Tree(consent(user={"username": "bob", "displayName": None}))
    assert "Signed in as @bob" in tree.by_id("signed-in").text


def test_redirect_target_shown() -> None:
    tree = Tree(consent())
    assert PARAMS["redirect_uri"] in tree.by_id("redirect-target").text


def test_error_shown() -> None:
    tree = Tree(consent(error="Session expired, try again."))
    err = tree.by_id("error")
    assert err.text == "Session expired, try again." and err.attrs["role"] == "alert"


# --- logo -------------------------------------------------------------------------------------

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


@pytest.mark.parametrize(
    "url",
    ["https://cdn.example.com/logo.png", "https://cdn.example.com/l.svg?v=1&x=2", "HTTPS://cdn.example.com/l.png", PNG],
)
def test_logo_rendered_for_https_and_data_images(url: str) -> None:
    tree = Tree(consent(app={**APP, "logoUrl": url}))
    img = tree.by_id("app-logo")
    assert img.attrs["src"] == url
    assert img.attrs["referrerpolicy"] == "no-referrer"
    assert img.attrs["alt"] == "Stream Buddy logo"
    assert not tree.has_id("app-avatar")


@pytest.mark.parametrize(
    "url",
    [
        None,
        "",
        "http://cdn.example.com/logo.png",
        "javascript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "data:image/svg+xml;base64,PHN2Zz4=",
        "data:image/png,<svg onload=alert(1)>",
        "//cdn.example.com/logo.png",
        "/static/logo.png",
        "https:///nohost.png",
        "https://cdn.example.com/a b.png",
        42,
    ],
)
def test_letter_avatar_otherwise(url: object) -> None:
    tree = Tree(consent(app={**APP, "logoUrl": url}))
    assert not tree.select("img")
    avatar = tree.by_id("app-avatar")
    assert avatar.text == "S" and avatar.attrs["aria-hidden"] == "true"


def test_avatar_letter_for_odd_names() -> None:
    assert Tree(consent(app={**APP, "name": "  ☃ bot", "logoUrl": None})).by_id("app-avatar").text == "B"
    assert Tree(consent(app={**APP, "name": "!!!", "logoUrl": None})).by_id("app-avatar").text == "?"


# --- escaping -----------------------------------------------------------------------------------

EVIL_APP = {
    "name": "<script>alert(1)</script>",
    "description": 'He said "hi" onmouseover="alert(1)" & \'bye\' <img src=x onerror=alert(2)>',
    "logoUrl": 'https://cdn.example.com/x.png"onerror="alert(3)"<script>',
    "reviewed": False,
    "clientId": '"><b>',
}
EVIL_PARAMS = {k: f"{k}\"><script>alert(4)</script>'&amp;" for k in OAUTH_PARAMS}
EVIL_USER = {"username": "<u>mallory</u>", "displayName": '"><svg onload=alert(5)>'}


def test_app_and_request_controlled_text_cannot_break_out() -> None:
    page = consent(app=EVIL_APP, params=EVIL_PARAMS, user=EVIL_USER, error="<b>bad</b>", csrf_token='"x')
    assert "<script" not in page.lower()
    assert "<svg" not in page.lower() and "<u>" not in page and "<b>" not in page
    assert not re.search(r"<img[^>]*\sonerror", page)
    tree = assert_well_formed_page(page)
    # Text round-trips exactly, which proves it was escaped rather than stripped.
    assert tree.by_id("app-name").text == EVIL_APP["name"]
    assert tree.by_id("app-description").text == EVIL_APP["description"]
    assert 'Signed in as "><svg onload=alert(5)> (@<u>mallory</u>)' in tree.by_id("signed-in").text
    assert tree.by_id("error").text == "<b>bad</b>"
    fields = hidden_fields(form_of(tree, tree.by_id("approve")))
    assert fields == {"action": "consent", "csrf_token": '"x', **EVIL_PARAMS}
    # The logo URL stays one attribute value; it can't add attributes to the <img>.
    img = tree.by_id("app-logo")
    assert img.attrs["src"] == EVIL_APP["logoUrl"] and set(img.attrs) == {
        "class", "id", "src", "alt", "width", "height", "referrerpolicy",
    }  # fmt: skip
    assert "<script>alert(1)</script>" in tree.select("title")[0].text


def test_scope_group_content_is_escaped_too() -> None:
    groups = [{"category": "<i>x</i>", "scopes": [{"name": '"a"', "description": "<b>d</b>", "sensitive": True}]}]
    page = consent(scope_groups=groups)
    assert "<i>" not in page and "<b>d" not in page
    tree = Tree(page)
    assert tree.select("li", "scope")[0].attrs["data-scope"] == '"a"'


# NUL cannot travel through HTML at all (browsers replace it); state is VSCHAR anyway.
_no_nul = st.text(alphabet=st.characters(exclude_characters="\x00", exclude_categories=("Cs",)))


@settings(max_examples=50)
@given(_no_nul, _no_nul, _no_nul)
def test_arbitrary_text_is_always_contained(name: str, description: str, state: str) -> None:
    page = consent(app={**APP, "name": name, "description": description}, params={**PARAMS, "state": state})
    page.encode("utf-8")
    tree = Tree(page)
    assert tree.by_id("app-name").text == (name or "Unnamed app")
    assert hidden_fields(form_of(tree, tree.by_id("approve")))["state"] == state
    assert not tree.select("script")


def test_carriage_return_survives_in_hidden_fields() -> None:
    page = consent(params={**PARAMS, "state": "a\r\nb\rc"})
    assert "\r" not in page  # a browser would normalise a raw CR to LF
    assert hidden_fields(form_of(Tree(page), Tree(page).by_id("approve")))["state"] == "a\r\nb\rc"


def test_lone_surrogates_do_not_break_encoding() -> None:
    page = consent(app={**APP, "name": "a\ud800b"})
    page.encode("utf-8")
    assert Tree(page).by_id("app-name").text == "a\ufffdb"


# --- signed out: login ------------------------------------------------------------------------


def test_login_page() -> None:
    tree = assert_well_formed_page(consent(user=None))
    username, password, submit = (tree.by_id(i) for i in ("login-username", "login-password", "login-submit"))
    assert username.attrs["name"] == "username" and username.attrs["autocomplete"] == "username"
    assert password.attrs["type"] == "password" and password.attrs["name"] == "password"
    assert submit.attrs["type"] == "submit"
    form = form_of(tree, submit)
    assert form is form_of(tree, username) is form_of(tree, password)
    assert form.attrs["method"] == "post" and form.attrs["action"] == "/oauth/authorize"
    assert hidden_fields(form) == {"action": "login", "csrf_token": "csrf-tok", **PARAMS}
    # Every input has a label pointing at it.
    label_targets = {lbl.attrs.get("for") for lbl in tree.select("label")}
    assert {"login-username", "login-password"} <= label_targets
    assert tree.by_id("app-name").text == "Stream Buddy"
    assert not tree.has_id("approve") and not tree.has_id("deny") and not tree.select(cls="scope")
    assert not tree.has_id("signed-in")


def test_login_page_with_error() -> None:
    tree = Tree(consent(user=None, error="Wrong username or password."))
    assert tree.by_id("error").text == "Wrong username or password."
    assert tree.has_id("login-username")


def test_login_page_escapes() -> None:
    page = consent(user=None, app=EVIL_APP, params=EVIL_PARAMS, csrf_token="<t>")
    assert "<script" not in page.lower() and "<t>" not in page
    tree = assert_well_formed_page(page)
    assert hidden_fields(form_of(tree, tree.by_id("login-submit"))) == {
        "action": "login", "csrf_token": "<t>", **EVIL_PARAMS,
    }  # fmt: skip


# --- error page and headers ---------------------------------------------------------------------


def test_error_page() -> None:
    page = render_error_page("Unknown app", 'No app has the client id <b>"x"</b>.')
    tree = assert_well_formed_page(page)
    assert tree.by_id("error-title").text == "Unknown app"
    assert tree.by_id("error").text == 'No app has the client id <b>"x"</b>.'
    assert "<b>" not in page
    assert not tree.select("form") and not tree.select("a")


def test_error_page_escapes_title() -> None:
    page = render_error_page("<script>x</script>", "m")
    assert "<script" not in page


def test_csp_pins_the_inline_stylesheet() -> None:
    tree = Tree(consent())
    css = tree.select("style")[0].text
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert "script-src" not in CONTENT_SECURITY_POLICY and "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert SECURITY_HEADERS["X-Frame-Options"] == "DENY"
    assert SECURITY_HEADERS["Referrer-Policy"] == "no-referrer"


def test_page_supports_dark_mode_and_mobile() -> None:
    page = consent()
    assert "prefers-color-scheme:dark" in page
    assert 'name="viewport"' in page
    # No external resources besides the logo.
    urls = re.findall(r"(?:https?:)?//[^\s\"'<>)]+", page)
    assert set(urls) <= {APP["logoUrl"], PARAMS["redirect_uri"].replace("&", "&amp;")}
