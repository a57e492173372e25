-- The external video platform integration (paths `extvideo`). Portable SQL; ms times.

-- An authorisation in flight: the `state` sent to the provider, stored as SHA-256.
CREATE TABLE extvideo_states (
    state_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- A user's connection. The provider's tokens are kept as issued: they are presented to
-- the provider on the user's behalf, so they cannot be hashed.
CREATE TABLE extvideo_connections (
    user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    account_id TEXT NOT NULL,
    account_name TEXT NOT NULL,
    account_url TEXT,
    access_token TEXT NOT NULL,
    refresh_token TEXT,
    expires_at BIGINT,
    scope TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'connected' CHECK (status IN ('connected', 'reauth_required')),
    connected_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
