-- 003: the auth epoch, a counter that every change able to withdraw a
-- check-in's authorisation moves (a service token revoked or deleted, a
-- service changed or deleted, a stream deleted or given to another owner, a
-- person deleted). Live may keep a check-in's lookup while the epoch stays;
-- a write made on a kept lookup checks the epoch in its own transaction.
CREATE TABLE auth_epoch (
	id integer PRIMARY KEY CHECK (id = 1),
	v  bigint NOT NULL
);
INSERT INTO auth_epoch (id, v) VALUES (1, 1);

CREATE FUNCTION bump_auth_epoch() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE auth_epoch SET v = v + 1;
	RETURN NULL;
END
$$;

CREATE TRIGGER credentials_auth_update AFTER UPDATE OF kind, service_id, person_id, hash, expires_at, revoked_at ON credentials
	FOR EACH ROW WHEN (OLD.kind = 'service_token') EXECUTE FUNCTION bump_auth_epoch();
CREATE TRIGGER credentials_auth_delete AFTER DELETE ON credentials
	FOR EACH ROW WHEN (OLD.kind = 'service_token') EXECUTE FUNCTION bump_auth_epoch();
CREATE TRIGGER services_auth_change AFTER UPDATE OF first_party, capabilities OR DELETE ON services
	FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
CREATE TRIGGER streams_auth_change AFTER UPDATE OF owner_id OR DELETE ON streams
	FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
CREATE TRIGGER persons_auth_delete AFTER DELETE ON persons
	FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
