-- The per-app webhook cap, enforced by the database: a counter on the app row,
-- raised by a guarded UPDATE in the transaction that inserts the webhook and lowered by the
-- one that deletes it. Concurrent creates on PostgreSQL queue on the app row's lock and
-- re-check the guard, so the cap holds where a COUNT(*) check-then-insert raced.
-- Portable SQL: runs on SQLite and PostgreSQL.

ALTER TABLE apps ADD COLUMN webhook_count INTEGER NOT NULL DEFAULT 0;

UPDATE apps SET webhook_count = (SELECT COUNT(*) FROM webhooks WHERE webhooks.client_id = apps.client_id);
