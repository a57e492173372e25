-- Journals keep their rendering beside the Markdown: the sanitised HTML and the plain-text
-- excerpt, written with the body, so reads never render. Rows from before this have NULL
-- and are rendered once on their first read.
ALTER TABLE journals ADD COLUMN html TEXT;
ALTER TABLE journals ADD COLUMN excerpt TEXT;
