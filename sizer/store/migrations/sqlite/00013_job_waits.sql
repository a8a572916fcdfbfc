-- What a job waited for (issue 30, "the dashboard shows what users
-- feel"): jobs.submitted is Slurm's submit time of the attempt whose start
-- jobs.started holds (PrologSlurmctld's record; Slurm gives a requeued job
-- a new submit time), NULL until that start is recorded; node_boots is how
-- each instance's node booted, from its bootstrap's report (POST
-- /v1/boots): when the bootstrap started, when slurmd started and when
-- slurmctld saw the node registered. The wait from submit to start splits
-- into queue, boot (launch to slurmd) and registration (slurmd to
-- registered). Number 00013: another branch holds 00012.

-- +goose Up
ALTER TABLE jobs ADD COLUMN submitted INTEGER;
-- the Fleet page's waits per class read the jobs started in the last day
CREATE INDEX IF NOT EXISTS jobs_started ON jobs(cluster, started);
CREATE TABLE IF NOT EXISTS node_boots(instance_id TEXT PRIMARY KEY, node TEXT NOT NULL, started INTEGER NOT NULL,
  slurmd INTEGER, registered INTEGER);

-- +goose Down
DROP TABLE node_boots;
DROP INDEX jobs_started;
ALTER TABLE jobs DROP COLUMN submitted;
