-- Socket.IO connection state recovery across processes (PostgreSQL broker): what a
-- connection that asked for recovery was (socket id, user, channels, where each channel
-- stands), keyed by a hash of its private recovery id, the user and the namespace. A live
-- connection's row (live = 1) is kept fresh by its process; a dropped one's (live = 0) is
-- written once at the drop. Either expires at `expires_at` (ms) and is taken at most once
-- (DELETE ... RETURNING) by whichever process the client reconnects to.
CREATE TABLE recovery_states (
    state_key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    live INTEGER NOT NULL,
    state TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX recovery_states_owner ON recovery_states (owner, live);
CREATE INDEX recovery_states_expiry ON recovery_states (expires_at);
