"""Redirect URI rules: registration checks, matching, building the redirect (sans-IO).

Decisions:

* Registration accepts three kinds of URI:
  - ``https://host[:port]/path[?query]`` — the normal case;
  - ``http://`` only on a loopback host (``127.0.0.1``, ``[::1]``, ``localhost``), for
    local development and native apps (RFC 8252 §7.3);
  - private-use URI schemes of native apps written as reverse DNS, so the scheme must
    contain a dot: ``com.example.app:/callback`` (RFC 8252 §7.1). Requiring the dot keeps
    out ``javascript:``, ``data:``, ``file:`` and other single-word schemes that browsers
    or the OS would give a meaning to.
  No fragment (RFC 6749 §3.1.2), no userinfo, no wildcards, at most 2048 characters,
  only characters RFC 3986 allows in a URI (so no spaces, quotes or angle brackets).
* Matching is exact string comparison (RFC 6749 §3.1.2, and the product rule "Redirect
  URIs match exactly"). RFC 8252 §7.3 asks servers to let loopback redirects use any
  port; volthub does NOT do that: a developer registers the port(s) they use. Port
  variance would let any local process listening on another port receive codes meant
  for the app, and exact matching keeps a single, predictable rule.
* When ``redirect_uri`` is omitted and the app registered exactly one URI, that URI is
  used (RFC 6749 §3.1.2.3). With several registered, omission matches nothing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from urllib.parse import SplitResult, quote, urlsplit

__all__ = [
    "LOOPBACK_HOSTS",
    "MAX_REDIRECT_URI_LENGTH",
    "InvalidRedirectURI",
    "build_redirect",
    "match_redirect_uri",
    "validate_registered_uri",
]

MAX_REDIRECT_URI_LENGTH = 2048
# As urlsplit reports them: lower-cased, IPv6 without brackets.
LOOPBACK_HOSTS: frozenset[str] = frozenset({"127.0.0.1", "::1", "localhost"})

# RFC 3986 §2: unreserved + reserved + "%" (percent-encodings checked separately).
_URI_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?")


class InvalidRedirectURI(ValueError):
    """A redirect URI an app may not register; the message says why."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def _check_syntax(uri: object) -> str:
    if not isinstance(uri, str) or not uri:
        raise InvalidRedirectURI("redirect URI must be a non-empty string")
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        raise InvalidRedirectURI(f"redirect URI is longer than {MAX_REDIRECT_URI_LENGTH} characters")
    if not _URI_CHARS.fullmatch(uri) or _BAD_PERCENT.search(uri):
        raise InvalidRedirectURI("redirect URI contains characters not allowed in a URI")
    if "#" in uri:
        raise InvalidRedirectURI("redirect URI must not contain a fragment")
    return uri


def _valid_host(host: str) -> bool:
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return host.endswith("]")
    labels = host.split(".")
    return all(_LABEL.fullmatch(label) for label in labels)


def _check_web(uri: str, parts: SplitResult) -> None:
    if not uri[len(parts.scheme) :].startswith("://") or not parts.netloc:
        raise InvalidRedirectURI("redirect URI must be absolute, with a host")
    if "@" in parts.netloc:
        raise InvalidRedirectURI("redirect URI must not contain user information")
    host = parts.netloc.rsplit(":", 1)[0] if not parts.netloc.endswith("]") else parts.netloc
    try:
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError:
        raise InvalidRedirectURI("redirect URI has an invalid port") from None
    if not host or not _valid_host(host):
        raise InvalidRedirectURI("redirect URI has an invalid host")
    if parts.scheme.lower() == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise InvalidRedirectURI(
            "http redirect URIs are allowed only on a loopback host (127.0.0.1, [::1] or localhost)"
        )


def _check_private_use(uri: str, scheme: str) -> None:
    if "." not in scheme or not all(scheme.split(".")):
        raise InvalidRedirectURI(
            "redirect URI must use https, http on a loopback host, or a reverse-DNS app scheme such as com.example.app:/callback"
        )
    if len(uri) == len(scheme) + 1:
        raise InvalidRedirectURI("redirect URI has nothing after its scheme")


def validate_registered_uri(uri: str) -> str:
    """Return ``uri`` unchanged if an app may register it, else raise ``InvalidRedirectURI``.

    Returned unchanged (not normalised) because matching later is exact on this string.
    """
    uri = _check_syntax(uri)
    scheme_match = _SCHEME.match(uri)
    if not scheme_match:
        raise InvalidRedirectURI("redirect URI must be absolute (start with a scheme)")
    scheme = scheme_match.group(1)
    if scheme.lower() in ("https", "http"):
        try:
            parts = urlsplit(uri)
        except ValueError:  # e.g. an unbalanced "[" in the host
            raise InvalidRedirectURI("redirect URI has an invalid host") from None
        _check_web(uri, parts)
    else:
        _check_private_use(uri, scheme)
    return uri


def match_redirect_uri(requested: str | None, registered: Sequence[str], *, allow_default: bool = True) -> str | None:
    """The registered URI that ``requested`` names exactly, or ``None``.

    An omitted (``None`` or empty) ``requested`` selects the only registered URI when
    ``allow_default`` and exactly one is registered (RFC 6749 §3.1.2.3). The caller must
    then remember that no redirect_uri was sent, because the token request may omit it too.
    """
    if not requested:
        return registered[0] if allow_default and len(registered) == 1 else None
    for uri in registered:
        if uri == requested:
            return uri
    return None


def _encode(params: Mapping[str, object]) -> str:
    # %20 rather than "+": decodes identically as form data (RFC 6749 Appendix B) and
    # also for clients that read the query as a plain URI component.
    return "&".join(f"{quote(str(k), safe='')}={quote(str(v), safe='')}" for k, v in params.items() if v is not None)


def build_redirect(redirect_uri: str, params: Mapping[str, object]) -> str:
    """``redirect_uri`` with ``params`` added to its query (None values dropped).

    The registered query is kept byte for byte (RFC 6749 §3.1.2) — string operations, not
    urlunsplit, which would drop an empty "?" or "//" and break exact-match expectations.
    A fragment, which registration forbids, would be kept after the new query.
    """
    base, hash_, fragment = redirect_uri.partition("#")
    query = _encode(params)
    if not query:
        return redirect_uri
    if "?" not in base:
        sep = "?"
    elif base.endswith(("?", "&")):
        sep = ""
    else:
        sep = "&"
    return f"{base}{sep}{query}{hash_}{fragment}"
