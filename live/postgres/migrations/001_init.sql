-- Live's state. Reports are stored as sent (bytea).
CREATE TABLE persons (
	id         text PRIMARY KEY,
	name       text NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE streams (
	id         text PRIMARY KEY,
	owner_id   text NOT NULL REFERENCES persons (id),
	created_at timestamptz NOT NULL
);

CREATE TABLE services (
	id           text PRIMARY KEY,
	name         text NOT NULL,
	first_party  boolean NOT NULL,
	capabilities text[] NOT NULL,
	created_at   timestamptz NOT NULL
);

CREATE TABLE credentials (
	id         text PRIMARY KEY,
	kind       text NOT NULL CHECK (kind IN ('service_token', 'person_token', 'desk_ticket', 'session')),
	service_id text REFERENCES services (id),
	person_id  text REFERENCES persons (id),
	hash       bytea NOT NULL UNIQUE CHECK (length(hash) = 32),
	created_at timestamptz NOT NULL,
	expires_at timestamptz,
	revoked_at timestamptz,
	CHECK ((kind = 'service_token') = (service_id IS NOT NULL AND person_id IS NULL)),
	CHECK ((kind <> 'service_token') = (person_id IS NOT NULL AND service_id IS NULL))
);

CREATE INDEX credentials_kind ON credentials (kind);

-- The stream's current registration: an accepted check-in.
CREATE TABLE registrations (
	stream_id   text PRIMARY KEY REFERENCES streams (id),
	report      bytea NOT NULL,
	received_at timestamptz NOT NULL,
	service_id  text NOT NULL REFERENCES services (id),
	subject_id  text NOT NULL REFERENCES persons (id)
);

-- The stream's last refused check-in.
CREATE TABLE refusals (
	stream_id  text PRIMARY KEY REFERENCES streams (id),
	at         timestamptz NOT NULL,
	service_id text NOT NULL REFERENCES services (id),
	subject_id text NOT NULL REFERENCES persons (id),
	errors     jsonb NOT NULL
);
