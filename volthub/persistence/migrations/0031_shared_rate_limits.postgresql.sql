-- Rate-limit budgets shared by every process of a PostgreSQL deployment (
-- [cluster] shared_rate_limits). One row per budget key: its GCRA theoretical arrival time
-- in the scaled units of volthub.protocol.ratelimit (epoch ns times the limit, beyond
-- BIGINT, hence NUMERIC), and the epoch ns after which the row means "full budget" and may
-- be deleted. PostgreSQL only: SQLite deployments are one process and count in memory.

CREATE TABLE rate_limit_budgets (
    key TEXT PRIMARY KEY,
    tat NUMERIC NOT NULL,
    expires_ns BIGINT NOT NULL
);

CREATE INDEX rate_limit_budgets_expires ON rate_limit_budgets (expires_ns);
