-- Bots and the one namespace of names. Portable SQL; times in epoch ms.

-- Every name a person or a bot is known by: usernames, default bot names, per-channel
-- custom bot names, and names still held after a bot stopped using them. The primary key
-- is what keeps the namespace unique across all of them (no check-then-insert race).
-- reserved_until NULL: in use; otherwise the name is held until then and free after.
CREATE TABLE name_claims (
    name_lower TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'bot', 'custom_bot')),
    holder TEXT NOT NULL,
    claimed_at BIGINT NOT NULL,
    released_at BIGINT,
    reserved_until BIGINT
);

INSERT INTO name_claims (name_lower, kind, holder, claimed_at)
    SELECT username_lower, 'user', id, created_at FROM users;

-- A bot app's bot: its own account (a users row with no usable password: it never logs
-- in; it posts through the tokens of the channels that authorised its app).
CREATE TABLE bots (
    client_id TEXT PRIMARY KEY REFERENCES apps(client_id) ON DELETE CASCADE,
    user_id TEXT NOT NULL UNIQUE REFERENCES users(id) ON DELETE CASCADE,
    command_prefix TEXT NOT NULL DEFAULT '!',
    default_permission TEXT NOT NULL DEFAULT 'everyone',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- The bot a channel chose through the bot-select flow (one per channel).
CREATE TABLE channel_bots (
    channel_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    client_id TEXT NOT NULL REFERENCES bots(client_id) ON DELETE CASCADE,
    selected_at BIGINT NOT NULL
);

CREATE INDEX channel_bots_by_bot ON channel_bots (client_id);

-- A bot's custom name in one channel (bot:write); its name is also a name_claims row.
CREATE TABLE bot_custom_names (
    client_id TEXT NOT NULL REFERENCES bots(client_id) ON DELETE CASCADE,
    channel_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (client_id, channel_id)
);
