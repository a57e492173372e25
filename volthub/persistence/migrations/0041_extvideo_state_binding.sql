-- External-video authorisations bound to the browser that asked: the SHA-256 of a random
-- value kept in that browser's cookie, and the PKCE verifier sent with the code exchange.
-- States written before this have neither and can no longer complete (they live minutes).
ALTER TABLE extvideo_states ADD COLUMN browser_hash TEXT;
ALTER TABLE extvideo_states ADD COLUMN code_verifier TEXT;
