-- 004: the history records degraded runs (alive while the report shows a
-- problem), and a refusal keeps the refused report's five facts and how many
-- errors it had.

-- Whether the registration's report shows a problem, and whether the one it
-- replaced did (so that Accept learns from its own upsert whether the stream
-- changed between alive and degraded).
ALTER TABLE registrations ADD COLUMN degraded INTEGER NOT NULL DEFAULT 0 CHECK (degraded IN (0, 1));
ALTER TABLE registrations ADD COLUMN previous_degraded INTEGER;

ALTER TABLE refusals ADD COLUMN facts TEXT NOT NULL DEFAULT '{}'; -- JSON object: fact name to its JSON value
ALTER TABLE refusals ADD COLUMN errors_total INTEGER NOT NULL DEFAULT 0;
UPDATE refusals SET errors_total = json_array_length(errors);

-- transitions' states gain 'degraded'. SQLite cannot change a CHECK
-- constraint, so the table is rebuilt (nothing references it).
CREATE TABLE transitions_v2 (
	id        INTEGER PRIMARY KEY,
	stream_id TEXT NOT NULL REFERENCES streams (id),
	at        INTEGER NOT NULL,
	state     TEXT NOT NULL CHECK (state IN ('alive', 'degraded', 'stale', 'refused', 'absent'))
) STRICT;
INSERT INTO transitions_v2 (id, stream_id, at, state) SELECT id, stream_id, at, state FROM transitions;
DROP TABLE transitions;
ALTER TABLE transitions_v2 RENAME TO transitions;
CREATE INDEX transitions_stream_at ON transitions (stream_id, at);
