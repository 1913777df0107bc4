-- 002: each stream's history, a refused report's reasons, credentials'
-- last use and login tickets, the health probe's row.

-- The receive time the current registration replaced (NULL when it started a
-- new run), so that Accept learns from its own upsert whether the stream had
-- gone stale.
ALTER TABLE registrations ADD COLUMN previous_received_at timestamptz;

ALTER TABLE refusals ADD COLUMN reasons jsonb NOT NULL DEFAULT '[]';

ALTER TABLE credentials ADD COLUMN last_used_at timestamptz;
ALTER TABLE credentials DROP CONSTRAINT credentials_kind_check;
ALTER TABLE credentials ADD CONSTRAINT credentials_kind_check
	CHECK (kind IN ('service_token', 'person_token', 'desk_ticket', 'session', 'login_ticket'));
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
	id        bigserial PRIMARY KEY,
	stream_id text NOT NULL REFERENCES streams (id),
	at        timestamptz NOT NULL,
	state     text NOT NULL CHECK (state IN ('alive', 'stale', 'refused', 'absent'))
);
CREATE INDEX transitions_stream_at ON transitions (stream_id, at);

-- One row that Probe writes to prove the store can write.
CREATE TABLE health_probe (
	id integer PRIMARY KEY CHECK (id = 1),
	at timestamptz NOT NULL
);
