"""Sans-IO OAuth 2.0 building blocks: scopes, PKCE, redirect URIs and the consent page."""

from .consent_page import (
    CONTENT_SECURITY_POLICY,
    SECURITY_HEADERS,
    render_consent_page,
    render_error_page,
)
from .pkce import PKCEError, s256_challenge, validate_challenge, verify
from .redirects import (
    InvalidRedirectURI,
    build_redirect,
    match_redirect_uri,
    validate_registered_uri,
)
from .scopes import (
    ALIASES,
    SCOPES,
    SENSITIVE_SCOPES,
    InvalidScope,
    Scope,
    ScopeRequest,
    catalogue_document,
    effective_scopes,
    format_scope,
    group_for_consent,
    has_scope,
    parse_scope,
)

__all__ = [
    "ALIASES",
    "CONTENT_SECURITY_POLICY",
    "SCOPES",
    "SECURITY_HEADERS",
    "SENSITIVE_SCOPES",
    "InvalidRedirectURI",
    "InvalidScope",
    "PKCEError",
    "Scope",
    "ScopeRequest",
    "build_redirect",
    "catalogue_document",
    "effective_scopes",
    "format_scope",
    "group_for_consent",
    "has_scope",
    "match_redirect_uri",
    "parse_scope",
    "render_consent_page",
    "render_error_page",
    "s256_challenge",
    "validate_challenge",
    "validate_registered_uri",
    "verify",
]
