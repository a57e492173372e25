-- One row per channel (a channel is its owner's user account): the row every write to a
-- channel's live state locks first, whichever component it concerns (chat, polls, ...).
-- `version` moves when a write changes state that channel actors cache (chat modes, a
-- poll's status), so an actor in another process knows to reload. Portable SQL.
CREATE TABLE channels (
    id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    version BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

INSERT INTO channels (id, version, created_at)
SELECT u.id, COALESCE(s.version, 0), u.created_at FROM users u LEFT JOIN chat_settings s ON s.channel_id = u.id;
