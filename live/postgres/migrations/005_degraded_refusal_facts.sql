-- 005: the history records degraded runs (alive while the report shows a
-- problem), and a refusal keeps the refused report's five facts and how many
-- errors it had.

-- Whether the registration's report shows a problem, and whether the one it
-- replaced did (so that Accept learns from its own upsert whether the stream
-- changed between alive and degraded).
ALTER TABLE registrations ADD COLUMN degraded boolean NOT NULL DEFAULT false;
ALTER TABLE registrations ADD COLUMN previous_degraded boolean;

ALTER TABLE refusals ADD COLUMN facts jsonb NOT NULL DEFAULT '{}';
ALTER TABLE refusals ADD COLUMN errors_total integer NOT NULL DEFAULT 0;
UPDATE refusals SET errors_total = jsonb_array_length(errors);

ALTER TABLE transitions DROP CONSTRAINT transitions_state_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_state_check
	CHECK (state IN ('alive', 'degraded', 'stale', 'refused', 'absent'));
