-- Raid cooldowns: `raider:<channel id>` and `target:<channel id>`, each until a time (ms).
-- Claimed with a guarded upsert in the raid's transaction, so every process shares them.
CREATE TABLE raid_cooldowns (
    key TEXT PRIMARY KEY,
    until_ms BIGINT NOT NULL
);
