-- Presence across processes: each process of a PostgreSQL deployment writes who
-- is connected to each channel through it, every [cluster] presence_interval_seconds; the
-- viewers list adds up the rows of processes heard from lately. A killed process's rows
-- are ignored once stale and deleted by the next process that writes.

CREATE TABLE presence (
    process_id TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    user_ids TEXT NOT NULL,
    anonymous INTEGER NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, process_id)
);

CREATE INDEX presence_process ON presence (process_id);
CREATE INDEX presence_updated_at ON presence (updated_at);
