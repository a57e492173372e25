-- Subscriptions become real; the table is 0003's.
-- One open (not ended) subscription per subscriber and channel, held by the database, so two
-- concurrent subscribes cannot both pay. An open row past its expires_at is ended (reason
-- 'expired') by the expiry service, or by the next subscribe of that member, whichever
-- comes first: both use the guarded `UPDATE ... WHERE ended_at IS NULL`.
-- The expiry service finds the next expiry with the partial index below.
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

CREATE UNIQUE INDEX subscriptions_one_open ON subscriptions (channel_id, user_id) WHERE ended_at IS NULL;
CREATE INDEX subscriptions_open_by_expiry ON subscriptions (expires_at) WHERE ended_at IS NULL;
CREATE INDEX subscriptions_by_gifter ON subscriptions (channel_id, gifter_id) WHERE gifter_id IS NOT NULL;
CREATE INDEX subscriptions_by_user ON subscriptions (user_id, started_at);
CREATE INDEX channel_roles_by_expiry ON channel_roles (expires_at) WHERE expires_at IS NOT NULL;
