-- Accounts, follows and server-wide secrets. Portable SQL: runs on SQLite and PostgreSQL.
-- Times are epoch milliseconds (BIGINT) so ordering and cursors are exact on both backends.

CREATE TABLE server_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    username TEXT NOT NULL,
    username_lower TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    avatar_url TEXT,
    bio TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE follows (
    follower_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    followed_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    followed_at BIGINT NOT NULL,
    PRIMARY KEY (follower_id, followed_id)
);

CREATE INDEX follows_by_followed ON follows (followed_id, followed_at, follower_id);
CREATE INDEX follows_by_follower ON follows (follower_id, followed_at, followed_id);
