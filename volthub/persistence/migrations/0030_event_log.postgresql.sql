-- The event log of the PostgreSQL bus relay.
-- Every event published on a PostgreSQL deployment is written here in the transaction that
-- causes it and announced with NOTIFY at commit; processes that missed a notification (a
-- lost LISTEN connection, a process that just started) read it back from here. Rows are
-- pruned by age ([events] log_retention_seconds). PostgreSQL only: SQLite deployments are
-- one process with the in-process bus.

-- The last position handed out per channel. The publishing transaction bumps it with an
-- upsert, so it holds the row lock until commit: positions of one channel commit in order,
-- whichever process publishes, and a rolled-back transaction leaves no gap.
CREATE TABLE event_channel_positions (
    channel_id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL
);

CREATE TABLE event_log (
    pos BIGSERIAL PRIMARY KEY,
    channel_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX event_log_channel_seq ON event_log (channel_id, seq);
CREATE INDEX event_log_event_id ON event_log (event_id);
CREATE INDEX event_log_created_at ON event_log (created_at);
