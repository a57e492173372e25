-- Developer apps (OAuth clients). Owned by the OAuth feature; webhooks reference apps.

CREATE TABLE apps (
    client_id TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    logo_url TEXT,
    redirect_uris TEXT NOT NULL DEFAULT '[]',
    client_secret_hash TEXT,
    bot_app BOOLEAN NOT NULL DEFAULT FALSE,
    reviewed BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX apps_by_owner ON apps (owner_id, created_at);

-- Sensitive scopes an operator has granted an app (`volthub apps grant`).
CREATE TABLE app_scope_grants (
    client_id TEXT NOT NULL REFERENCES apps(client_id) ON DELETE CASCADE,
    scope TEXT NOT NULL,
    granted_at BIGINT NOT NULL,
    PRIMARY KEY (client_id, scope)
);

-- A user's authorisation of an app: one per redeemed authorization code. A user may hold
-- several for one app (one per device); together they are that app's "connection".
-- consented_scope: the scope string the user approved (legacy aliases kept, canonical order).
-- held_scope: the real scope names the grant confers now, space-separated; recomputed at
-- every refresh and narrowed at once when an operator withdraws a scope.
CREATE TABLE oauth_grants (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_id TEXT NOT NULL REFERENCES apps(client_id) ON DELETE CASCADE,
    consented_scope TEXT NOT NULL,
    held_scope TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    revoked_at BIGINT,
    revoke_reason TEXT
);

CREATE INDEX oauth_grants_by_user ON oauth_grants (user_id, client_id);
CREATE INDEX oauth_grants_by_client ON oauth_grants (client_id);

-- Authorization codes, stored as SHA-256 of the code. Kept after use (used_at, grant_id)
-- so a replayed code can revoke what it issued (RFC 6749 §4.1.2).
CREATE TABLE oauth_codes (
    code_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL REFERENCES apps(client_id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    redirect_uri TEXT NOT NULL,
    redirect_uri_sent BOOLEAN NOT NULL,
    scope TEXT NOT NULL,
    code_challenge TEXT,
    code_challenge_method TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    grant_id TEXT REFERENCES oauth_grants(id) ON DELETE SET NULL
);

CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at);

-- Refresh tokens, stored as SHA-256. A rotated one is kept (rotated_at) until it expires:
-- presenting it again revokes its grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    rotated_at BIGINT
);

CREATE INDEX oauth_refresh_by_grant ON oauth_refresh_tokens (grant_id);
CREATE INDEX oauth_refresh_by_expiry ON oauth_refresh_tokens (expires_at);
