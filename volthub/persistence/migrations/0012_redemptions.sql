-- Channel-points redemptions and how points are earned.
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

-- One row per redemption, written in the transaction that moves its cost from the viewer's
-- points account to the channel's `redemptions` system account. status: unfulfilled, then
-- fulfilled or rejected once (a guarded UPDATE ... WHERE status = 'unfulfilled'); a
-- rejection refunds the cost in its transaction. reward_id is not a foreign key: built-in
-- rewards are not stored, and a redemption outlives a deleted reward (title and cost kept).
-- stream_id is not one either: the streams table comes with a later migration (0020).
CREATE TABLE channel_point_redemptions (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    stream_id TEXT NOT NULL,
    reward_id TEXT NOT NULL,
    reward_title TEXT NOT NULL,
    reward_cost INTEGER NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    user_input TEXT,
    status TEXT NOT NULL DEFAULT 'unfulfilled',
    redeemed_at BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE INDEX channel_point_redemptions_by_stream ON channel_point_redemptions (stream_id, redeemed_at, id);
CREATE INDEX channel_point_redemptions_by_stream_reward
    ON channel_point_redemptions (stream_id, reward_id, user_id) WHERE status <> 'rejected';

-- Watching: the last watch interval (epoch ms // interval length) credited per channel. The
-- guarded UPDATE that advances it is what keeps two processes on one database from both
-- crediting one interval.
CREATE TABLE channel_point_watch_intervals (
    channel_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    last_interval BIGINT NOT NULL
);

-- Follow bonus: paid once per follower and channel, ever (an unfollow and refollow pays
-- nothing more). The primary key is the rule.
CREATE TABLE channel_point_follow_bonuses (
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    paid_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, user_id)
);
