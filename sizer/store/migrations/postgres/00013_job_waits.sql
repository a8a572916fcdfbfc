-- What a job waited for (issue 30), as SQLite's 00013: jobs.submitted is
-- Slurm's submit time of the attempt whose start jobs.started holds, NULL
-- until that start is recorded; node_boots is how each instance's node
-- booted (its bootstrap's report). Number 00013: another branch holds 00012.

-- +goose Up
ALTER TABLE jobs ADD COLUMN submitted BIGINT;
CREATE INDEX jobs_started ON jobs(cluster, started);
CREATE TABLE node_boots(instance_id TEXT PRIMARY KEY, node TEXT NOT NULL, started BIGINT NOT NULL,
  slurmd BIGINT, registered BIGINT);

-- +goose Down
DROP TABLE node_boots;
DROP INDEX jobs_started;
ALTER TABLE jobs DROP COLUMN submitted;
