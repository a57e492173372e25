-- Which webhooks follow a channel changes rarely; every event of it asks. The channel's
-- position row carries a version of its owner's webhook subscriptions, returned by the
-- event-log upsert that every publishing transaction makes anyway: a process reads the
-- subscribers again only when the version moved. Triggers move it on every change that
-- can alter who is subscribed (a webhook added, removed, re-pointed, re-subscribed,
-- enabled or disabled; its app removed or handed to another owner), in the changing
-- transaction, so a publishing transaction sees either the old version and the old
-- subscribers or the new of both (the row lock orders them). A publishing transaction
-- holding the position row may be about to reference a webhook in a delivery row, so a
-- change should take the position row before it locks webhook rows: an app's removal does
-- here (before its webhooks cascade); a webhook's removal takes it in the application
-- first, since PostgreSQL locks the row before a BEFORE DELETE trigger runs. Versions come
-- from one sequence and never repeat: a new position row takes a fresh one, so nothing read
-- for a row that is gone (a channel's first event rolled back, a removed account) is taken
-- as current, and the triggers need only move rows that exist.
CREATE SEQUENCE webhooks_versions;

ALTER TABLE event_channel_positions ADD COLUMN webhooks_version BIGINT NOT NULL DEFAULT nextval('webhooks_versions');

CREATE FUNCTION webhooks_version_bump(owner TEXT) RETURNS void LANGUAGE sql AS
    'UPDATE event_channel_positions SET webhooks_version = nextval(''webhooks_versions'') WHERE channel_id = owner';

CREATE FUNCTION webhooks_subscription_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN PERFORM webhooks_version_bump(a.owner_id) FROM apps a WHERE a.client_id = OLD.client_id; END IF;
    IF TG_OP <> 'DELETE' THEN PERFORM webhooks_version_bump(a.owner_id) FROM apps a WHERE a.client_id = NEW.client_id; END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW; END
$$;

CREATE FUNCTION webhooks_owner_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM webhooks_version_bump(OLD.owner_id);
    IF TG_OP = 'UPDATE' THEN PERFORM webhooks_version_bump(NEW.owner_id); RETURN NEW; END IF;
    RETURN OLD; END
$$;

CREATE TRIGGER webhooks_subscription_change BEFORE INSERT OR DELETE OR UPDATE OF client_id, events, enabled
    ON webhooks FOR EACH ROW EXECUTE FUNCTION webhooks_subscription_changed();

CREATE TRIGGER webhooks_owner_change BEFORE DELETE OR UPDATE OF owner_id
    ON apps FOR EACH ROW EXECUTE FUNCTION webhooks_owner_changed();
