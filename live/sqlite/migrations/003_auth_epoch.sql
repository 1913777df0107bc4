-- 003: the auth epoch, a counter that every change able to withdraw a
-- check-in's authorisation moves (a service token revoked or deleted, a
-- service changed or deleted, a stream deleted or given to another owner, a
-- person deleted). Live may keep a check-in's lookup while the epoch stays;
-- a write made on a kept lookup checks the epoch in its own transaction.
CREATE TABLE auth_epoch (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	v  INTEGER NOT NULL
) STRICT;
INSERT INTO auth_epoch (id, v) VALUES (1, 1);

CREATE TRIGGER credentials_auth_update AFTER UPDATE OF kind, service_id, person_id, hash, expires_at, revoked_at ON credentials
	WHEN OLD.kind = 'service_token'
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
CREATE TRIGGER credentials_auth_delete AFTER DELETE ON credentials
	WHEN OLD.kind = 'service_token'
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
CREATE TRIGGER services_auth_update AFTER UPDATE OF first_party, capabilities ON services
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
CREATE TRIGGER services_auth_delete AFTER DELETE ON services
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
CREATE TRIGGER streams_auth_update AFTER UPDATE OF owner_id ON streams
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
CREATE TRIGGER streams_auth_delete AFTER DELETE ON streams
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
CREATE TRIGGER persons_auth_delete AFTER DELETE ON persons
	BEGIN UPDATE auth_epoch SET v = v + 1; END;
