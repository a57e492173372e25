-- Channel-points rewards: the custom rewards a channel offers. Built-in rewards
-- (builtInType set) are not stored: every channel has them (volthub/hub/channel_points.py).
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

CREATE TABLE channel_point_rewards (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    cost INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    icon_url TEXT,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    requires_moderator_approval BOOLEAN NOT NULL DEFAULT FALSE,
    max_per_stream INTEGER,
    max_per_user_per_stream INTEGER,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX channel_point_rewards_by_channel ON channel_point_rewards (channel_id, created_at, id);
