-- Interactive control: polls, predictions, giveaways, goals, timers.
-- Each table is owned by one channel actor component (volthub/hub/components/*). Deadline
-- effects are guarded updates on `status`, so two processes never both end the same poll.
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

CREATE TABLE polls (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    options TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    ends_at BIGINT NOT NULL,
    ended_at BIGINT
);

CREATE INDEX polls_open ON polls (status, channel_id);
CREATE INDEX polls_by_channel ON polls (channel_id, started_at);

CREATE TABLE poll_votes (
    poll_id TEXT NOT NULL REFERENCES polls(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    option_id TEXT NOT NULL,
    voted_at BIGINT NOT NULL,
    PRIMARY KEY (poll_id, user_id)
);

CREATE TABLE predictions (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    outcomes TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    locks_at BIGINT NOT NULL,
    locked_at BIGINT,
    ended_at BIGINT,
    winning_outcome_id TEXT
);

CREATE INDEX predictions_open ON predictions (status, channel_id);
CREATE INDEX predictions_by_channel ON predictions (channel_id, started_at);

CREATE TABLE prediction_bets (
    prediction_id TEXT NOT NULL REFERENCES predictions(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    outcome_id TEXT NOT NULL,
    points BIGINT NOT NULL,
    payout BIGINT,
    placed_at BIGINT NOT NULL,
    PRIMARY KEY (prediction_id, user_id)
);

CREATE TABLE giveaways (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    subscribers_only BOOLEAN NOT NULL DEFAULT FALSE,
    status TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    ends_at BIGINT,
    ended_at BIGINT
);

CREATE INDEX giveaways_open ON giveaways (status, channel_id);
CREATE INDEX giveaways_by_channel ON giveaways (channel_id, started_at);

CREATE TABLE giveaway_entries (
    giveaway_id TEXT NOT NULL REFERENCES giveaways(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    entered_at BIGINT NOT NULL,
    won_at BIGINT,
    PRIMARY KEY (giveaway_id, user_id)
);

CREATE TABLE goals (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    title TEXT NOT NULL,
    current BIGINT NOT NULL DEFAULT 0,
    target BIGINT NOT NULL,
    period TEXT NOT NULL,
    period_start BIGINT NOT NULL,
    completed_period BIGINT,
    created_at BIGINT NOT NULL
);

CREATE INDEX goals_by_channel ON goals (channel_id, created_at);

CREATE TABLE timers (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    status TEXT NOT NULL,
    duration_seconds BIGINT NOT NULL,
    remaining_ms BIGINT NOT NULL,
    ends_at BIGINT,
    subathon TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX timers_by_status ON timers (status, channel_id);
CREATE INDEX timers_by_channel ON timers (channel_id, created_at);

-- Platform events already counted towards goals and subathon timers: a follow seen twice
-- (relayed by another process, redelivered) moves nothing twice.
CREATE TABLE interactive_counted_events (
    event_id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL,
    counted_at BIGINT NOT NULL
);
