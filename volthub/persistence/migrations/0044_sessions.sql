-- First-party sessions: one per session token issued (sign-in, registration,
-- `volthub token --first-party`). The token carries the id (its `sid` claim); a token
-- whose session is revoked or gone is refused. Portable SQL; ms times.
CREATE TABLE auth_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);

CREATE INDEX auth_sessions_by_user ON auth_sessions (user_id, created_at);
CREATE INDEX auth_sessions_by_expiry ON auth_sessions (expires_at);
