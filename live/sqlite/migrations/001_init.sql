-- Live's state. Times are Unix nanoseconds (UTC); reports are stored as sent.
CREATE TABLE persons (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE streams (
	id         TEXT PRIMARY KEY,
	owner_id   TEXT NOT NULL REFERENCES persons (id),
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE services (
	id           TEXT PRIMARY KEY,
	name         TEXT NOT NULL,
	first_party  INTEGER NOT NULL CHECK (first_party IN (0, 1)),
	capabilities TEXT NOT NULL, -- JSON array of strings
	created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE credentials (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL CHECK (kind IN ('service_token', 'person_token', 'desk_ticket', 'session')),
	service_id TEXT REFERENCES services (id),
	person_id  TEXT REFERENCES persons (id),
	hash       BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	revoked_at INTEGER,
	CHECK ((kind = 'service_token') = (service_id IS NOT NULL AND person_id IS NULL)),
	CHECK ((kind <> 'service_token') = (person_id IS NOT NULL AND service_id IS NULL))
) STRICT;

CREATE INDEX credentials_kind ON credentials (kind);

-- The stream's current registration: an accepted check-in.
CREATE TABLE registrations (
	stream_id   TEXT PRIMARY KEY REFERENCES streams (id),
	report      BLOB NOT NULL,
	received_at INTEGER NOT NULL,
	service_id  TEXT NOT NULL REFERENCES services (id),
	subject_id  TEXT NOT NULL REFERENCES persons (id)
) STRICT;

-- The stream's last refused check-in.
CREATE TABLE refusals (
	stream_id  TEXT PRIMARY KEY REFERENCES streams (id),
	at         INTEGER NOT NULL,
	service_id TEXT NOT NULL REFERENCES services (id),
	subject_id TEXT NOT NULL REFERENCES persons (id),
	errors     TEXT NOT NULL -- JSON array of {path, message}
) STRICT;
