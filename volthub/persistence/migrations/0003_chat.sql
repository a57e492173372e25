-- Chat: per-channel chat state, messages, bans and timeouts; and the channel-role and
-- subscription tables chat reads for badges (their routes come with later features).
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

-- One row per channel that has chatted. `version` moves when the settings change, so a
-- channel actor in another process knows its copy is stale; `message_seq` orders messages
-- within the channel (timestamps can tie), and updating this row is the per-channel lock
-- every chat write takes first.
CREATE TABLE chat_settings (
    channel_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    slow_mode BOOLEAN NOT NULL DEFAULT FALSE,
    slow_mode_seconds INTEGER NOT NULL DEFAULT 0,
    followers_only BOOLEAN NOT NULL DEFAULT FALSE,
    subscribers_only BOOLEAN NOT NULL DEFAULT FALSE,
    emote_only BOOLEAN NOT NULL DEFAULT FALSE,
    version BIGINT NOT NULL DEFAULT 0,
    message_seq BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL
);

-- `payload` is the chat.message event data as sent, JSON text; history serves
-- it as is. A deleted message keeps its row (deleted_at set) and leaves the history.
CREATE TABLE chat_messages (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    is_system BOOLEAN NOT NULL DEFAULT FALSE,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT,
    deleted_by TEXT
);

CREATE UNIQUE INDEX chat_messages_by_seq ON chat_messages (channel_id, seq);
CREATE INDEX chat_messages_by_sender ON chat_messages (channel_id, user_id, created_at);
CREATE INDEX chat_messages_by_time ON chat_messages (channel_id, created_at);

-- A ban (expires_at NULL) or a timeout (expires_at = its end). At most one per user and
-- channel: the latest moderation action replaces the earlier one. An expired timeout is
-- ignored wherever bans are read, so no timer has to lift it.
CREATE TABLE chat_bans (
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    moderator_id TEXT REFERENCES users(id) ON DELETE SET NULL,
    reason TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    PRIMARY KEY (channel_id, user_id)
);

-- Moderator and VIP roles; expires_at NULL means until removed.
CREATE TABLE channel_roles (
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('moderator', 'vip')),
    granted_at BIGINT NOT NULL,
    expires_at BIGINT,
    PRIMARY KEY (channel_id, user_id, role)
);

CREATE INDEX channel_roles_by_user ON channel_roles (user_id);

-- A subscription is active while ended_at IS NULL and started_at <= now < expires_at.
CREATE TABLE subscriptions (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    tier TEXT NOT NULL,
    is_gift BOOLEAN NOT NULL DEFAULT FALSE,
    gifter_id TEXT REFERENCES users(id) ON DELETE SET NULL,
    started_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    months INTEGER NOT NULL DEFAULT 1,
    ended_at BIGINT,
    end_reason TEXT
);

CREATE INDEX subscriptions_by_member ON subscriptions (channel_id, user_id, expires_at);
CREATE INDEX subscriptions_by_channel ON subscriptions (channel_id, expires_at);
