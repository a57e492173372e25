-- Volts purchases: one row per purchase, written `pending` before the payment provider is
-- asked; `confirmed` (and credited, in the same transaction) or `failed` once, by a guarded
-- UPDATE ... WHERE status = 'pending'. So a replayed confirmation credits nothing more.
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.
CREATE TABLE volt_purchases (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    amount BIGINT NOT NULL,
    provider TEXT NOT NULL,
    reference TEXT,
    checkout_url TEXT,
    status TEXT NOT NULL DEFAULT 'pending',
    transaction_id TEXT,
    created_at BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE UNIQUE INDEX volt_purchases_by_reference ON volt_purchases (provider, reference);
CREATE INDEX volt_purchases_by_user ON volt_purchases (user_id, created_at);
