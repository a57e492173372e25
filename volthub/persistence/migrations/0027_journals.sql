-- Journals: a user's posts, drafts until published. Portable SQL; times in ms.
-- `body` is the Markdown as written; it is rendered and sanitised when read.
CREATE TABLE journals (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    slug TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'published')),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    published_at BIGINT,
    UNIQUE (user_id, slug)
);

CREATE INDEX journals_published ON journals (user_id, status, published_at, id);

-- Images uploaded for a journal; they go with it.
CREATE TABLE journal_images (
    journal_id TEXT NOT NULL REFERENCES journals(id) ON DELETE CASCADE,
    media_id TEXT NOT NULL REFERENCES media(id),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (journal_id, media_id)
);
