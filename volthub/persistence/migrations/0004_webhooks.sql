-- App webhooks, their outbox / delivery log, and user notifications.
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL REFERENCES apps(client_id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    -- JSON array of subscribed event names
    events TEXT NOT NULL,
    -- kept in clear: it must sign
    secret TEXT NOT NULL,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    -- NULL while enabled; 'owner', 'failures' or 'gone' (a 410 answer) once disabled
    disabled_reason TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX webhooks_by_app ON webhooks (client_id, created_at);

-- One row per delivery: the outbox while state = 'pending', the delivery log afterwards.
CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id TEXT NOT NULL,
    -- the name it is delivered under (a legacy alias when the webhook asked for that)
    event_name TEXT NOT NULL,
    -- the exact JSON body: every attempt and every redelivery sends these bytes
    body TEXT NOT NULL,
    -- 'pending', 'succeeded' or 'failed' (its attempts ran out)
    state TEXT NOT NULL,
    -- failures counted by the retry schedule (reset when a disabled webhook is re-enabled)
    failed_attempts INTEGER NOT NULL DEFAULT 0,
    attempt_count INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    -- lease of the worker holding it: a crashed worker's claim lapses and the row is retried
    claimed_until BIGINT,
    claim_token TEXT,
    redelivery_of TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    completed_at BIGINT
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at, id);
CREATE INDEX webhook_deliveries_completed ON webhook_deliveries (completed_at);

CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    attempted_at BIGINT NOT NULL,
    -- 'success', 'failure' or 'gone'
    outcome TEXT NOT NULL,
    status_code INTEGER,
    latency_ms INTEGER NOT NULL,
    error TEXT,
    PRIMARY KEY (delivery_id, number)
);

CREATE TABLE notifications (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    title TEXT NOT NULL,
    message TEXT NOT NULL,
    -- JSON object with type-specific fields (e.g. clientId and webhookId)
    data TEXT NOT NULL DEFAULT '{}',
    read_at BIGINT,
    created_at BIGINT NOT NULL
);

CREATE INDEX notifications_by_user ON notifications (user_id, created_at, id);
