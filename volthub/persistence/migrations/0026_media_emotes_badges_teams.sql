-- Uploaded images, emotes, badges and teams. Portable SQL; times in ms.

-- An uploaded image, sniffed and size-checked before it is stored. `data` holds it
-- base64-encoded when [media] storage = "database" (one schema for both backends);
-- with "disk" it is NULL and `path` names the file under [media] directory. An id's bytes
-- never change, so they are served as immutable.
CREATE TABLE media (
    id TEXT PRIMARY KEY,
    owner_id TEXT REFERENCES users(id) ON DELETE SET NULL,
    purpose TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    data TEXT,
    path TEXT,
    created_at BIGINT NOT NULL
);

-- Emotes: global (channel_id NULL) or a channel's. Codes are unique within a collection;
-- a channel's emote shadows a global one of the same code in that channel.
CREATE TABLE emotes (
    id TEXT PRIMARY KEY,
    channel_id TEXT REFERENCES users(id) ON DELETE CASCADE,
    scope_key TEXT NOT NULL,
    code TEXT NOT NULL,
    media_id TEXT NOT NULL REFERENCES media(id),
    created_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX emotes_by_code ON emotes (scope_key, code);

-- The badge catalogue: slugs chat messages carry, by category.
CREATE TABLE badges (
    slug TEXT PRIMARY KEY,
    category TEXT NOT NULL CHECK (category IN ('event', 'achievement', 'system')),
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);

INSERT INTO badges (slug, category, title, description, created_at) VALUES
    ('broadcaster', 'system', 'Broadcaster', 'The channel''s owner.', 0),
    ('moderator', 'system', 'Moderator', 'A moderator of the channel.', 0),
    ('vip', 'system', 'VIP', 'A VIP of the channel.', 0),
    ('subscriber', 'system', 'Subscriber', 'An active subscriber of the channel.', 0),
    ('bot', 'system', 'Bot', 'A bot posting for the channel.', 0),
    ('staff', 'system', 'Staff', 'Works on this platform.', 0),
    ('verified', 'system', 'Verified', 'A verified creator.', 0),
    ('founder', 'event', 'Founder', 'Joined in the platform''s first season.', 0),
    ('launch-party', 'event', 'Launch party', 'Was there at launch.', 0),
    ('first-stream', 'achievement', 'First stream', 'Went live for the first time.', 0),
    ('100-followers', 'achievement', '100 followers', 'Reached 100 followers.', 0),
    ('1000-followers', 'achievement', '1,000 followers', 'Reached 1,000 followers.', 0);

-- Badges awarded to a user, globally (scope_key '') or in one channel (its id).
CREATE TABLE user_badges (
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    slug TEXT NOT NULL REFERENCES badges(slug) ON DELETE CASCADE,
    channel_id TEXT REFERENCES users(id) ON DELETE CASCADE,
    scope_key TEXT NOT NULL,
    awarded_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, slug, scope_key)
);

-- Teams of channels, managed by the operator (`volthub teams`).
CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE team_members (
    team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'member')),
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);

CREATE INDEX team_members_by_user ON team_members (user_id);
