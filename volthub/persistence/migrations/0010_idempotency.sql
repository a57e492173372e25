-- Idempotency-Key of money-moving POSTs: one row per user, route and
-- key. The first request claims the row (state 'pending') with the hash of its body; when
-- it has answered, the row holds that answer (status, content type, body) and every repeat
-- gets those bytes back. A repeat with another body is refused (422). The primary key is
-- the claim: of concurrent first requests, across processes too, exactly one inserts.
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

CREATE TABLE idempotency_keys (
    user_id TEXT NOT NULL,
    route TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done')),
    claim_token TEXT NOT NULL,
    response_status INTEGER,
    response_type TEXT,
    response_body TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, route, idem_key)
);

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
