-- Display names may not look like another account's username: each username's confusable
-- skeleton (volthub.protocol.names) is kept and indexed for that lookup. Existing rows get
-- theirs right after this migration (computed in Python), and display names set before the
-- rule that break it are logged then, not changed. Portable SQL.
ALTER TABLE users ADD COLUMN username_skeleton TEXT;

CREATE INDEX users_by_username_skeleton ON users (username_skeleton);
