-- The per-channel cap on custom rewards (MAX_REWARDS_PER_CHANNEL), held by the database.
-- Counting rows and then inserting lets two concurrent creates on PostgreSQL both see 99
-- and both insert. Instead each channel has one counter row, raised in the transaction
-- that inserts the reward, with the cap in the UPDATE's WHERE:
--   UPDATE channel_point_reward_counts SET reward_count = reward_count + 1
--   WHERE channel_id = ? AND reward_count < ?
-- A concurrent create waits on the row lock and re-checks the cap against the committed
-- count; no row updated means the channel is full. Whatever deletes a reward must lower
-- the count in the same transaction.
-- Portable SQL: runs on SQLite and PostgreSQL.

CREATE TABLE channel_point_reward_counts (
    channel_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    reward_count INTEGER NOT NULL DEFAULT 0 CHECK (reward_count >= 0)
);

INSERT INTO channel_point_reward_counts (channel_id, reward_count)
SELECT channel_id, COUNT(*) FROM channel_point_rewards GROUP BY channel_id;
