-- 002: each stream's history, a refused report's reasons, credentials'
-- last use and login tickets, the health probe's row.

-- The receive time the current registration replaced (NULL when it started a
-- new run), so that Accept learns from its own upsert whether the stream had
-- gone stale.
ALTER TABLE registrations ADD COLUMN previous_received_at INTEGER;

ALTER TABLE refusals ADD COLUMN reasons TEXT NOT NULL DEFAULT '[]'; -- JSON array of strings

-- credentials gains the login_ticket kind and last_used_at. SQLite cannot
-- change a CHECK constraint, so the table is rebuilt (nothing references it).
CREATE TABLE credentials_v2 (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL CHECK (kind IN ('service_token', 'person_token', 'desk_ticket', 'session', 'login_ticket')),
	service_id   TEXT REFERENCES services (id),
	person_id    TEXT REFERENCES persons (id),
	hash         BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER,
	revoked_at   INTEGER,
	last_used_at INTEGER,
	CHECK ((kind = 'service_token') = (service_id IS NOT NULL AND person_id IS NULL)),
	CHECK ((kind <> 'service_token') = (person_id IS NOT NULL AND service_id IS NULL))
) STRICT;
INSERT INTO credentials_v2 (id, kind, service_id, person_id, hash, created_at, expires_at, revoked_at)
	SELECT id, kind, service_id, person_id, hash, created_at, expires_at, revoked_at FROM credentials;
DROP TABLE credentials;
ALTER TABLE credentials_v2 RENAME TO credentials;
CREATE INDEX credentials_kind ON credentials (kind);
CREATE INDEX credentials_person ON credentials (person_id);
CREATE INDEX credentials_service ON credentials (service_id);

CREATE INDEX streams_owner ON streams (owner_id);
CREATE INDEX registrations_service ON registrations (service_id);
CREATE INDEX registrations_subject ON registrations (subject_id);
CREATE INDEX refusals_service ON refusals (service_id);
CREATE INDEX refusals_subject ON refusals (subject_id);

-- Each stream's state transitions (live.Transition), pruned to
-- live.HistoryMaxAge and live.HistoryMaxRows.
CREATE TABLE transitions (
	id        INTEGER PRIMARY KEY,
	stream_id TEXT NOT NULL REFERENCES streams (id),
	at        INTEGER NOT NULL,
	state     TEXT NOT NULL CHECK (state IN ('alive', 'stale', 'refused', 'absent'))
) STRICT;
CREATE INDEX transitions_stream_at ON transitions (stream_id, at);

-- One row that Probe writes to prove the store can write.
CREATE TABLE health_probe (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	at INTEGER NOT NULL
) STRICT;
