"""Sans-IO OAuth 2.0 building blocks: scopes (:mod:`.scopes`), PKCE (:mod:`.pkce`) and
redirect URIs (:mod:`.redirects`). The consent page is rendered in :mod:`volthub.http.consent_page`."""
