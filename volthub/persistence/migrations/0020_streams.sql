-- Streams. Portable SQL: runs on
-- SQLite and PostgreSQL. Times are epoch milliseconds; tag lists are JSON arrays of slugs.

-- What a channel has set for its streams, and its stream key. The key itself is never
-- stored: it is derived from a server secret and `key_nonce` (so `stream/setup` can show
-- it), and found on publish by its SHA-256 (`key_hash`). A new nonce is a new key.
CREATE TABLE stream_settings (
    channel_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    title TEXT NOT NULL DEFAULT '',
    category TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    channel_tags TEXT NOT NULL DEFAULT '[]',
    language TEXT,
    key_nonce TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    updated_at BIGINT NOT NULL
);

-- One row per broadcast. Open (ended_at NULL) while live; at most one open per channel.
-- key_hash: the key it was published with (unpublish finds the stream by it even after the
-- key was regenerated); media_path: the media server's path name (MediaMTX hooks use it).
CREATE TABLE streams (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    key_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    media_path TEXT,
    started_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    ended_at BIGINT,
    end_reason TEXT
);
CREATE UNIQUE INDEX streams_one_open_per_channel ON streams (channel_id) WHERE ended_at IS NULL;
CREATE INDEX streams_open ON streams (started_at, id) WHERE ended_at IS NULL;
CREATE INDEX streams_by_key ON streams (key_hash) WHERE ended_at IS NULL;

-- The recording a finished stream leaves (a record: volthub processes no video).
CREATE TABLE vods (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    stream_id TEXT NOT NULL UNIQUE REFERENCES streams(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    category TEXT,
    tags TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX vods_by_channel ON vods (channel_id, created_at, id);

-- Clips: records of a span of a live or recorded stream; no video processing.
CREATE TABLE clips (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    stream_id TEXT NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    creator_id TEXT REFERENCES users(id) ON DELETE SET NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    duration_ms BIGINT NOT NULL,
    start_offset_ms BIGINT NOT NULL,
    highlight BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL
);
CREATE INDEX clips_by_channel ON clips (channel_id, created_at, id);
