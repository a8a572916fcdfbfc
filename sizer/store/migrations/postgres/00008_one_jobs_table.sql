-- One table per fact (issue 24), as SQLite's 00006: jobs holds a job's
-- request once, with its launch time (updated, NULL for a job only seen
-- starting) and its run under a recurring-job key (job_key ... evidence,
-- NULL for one only seen launching); job_history and the never-written
-- records_seen go. A job in both keeps jobs' text columns (history's where
-- jobs' is empty) and the larger of each count.

-- +goose Up
ALTER TABLE jobs ALTER COLUMN updated DROP NOT NULL;
ALTER TABLE jobs ADD COLUMN job_key TEXT, ADD COLUMN started BIGINT, ADD COLUMN ended BIGINT, ADD COLUMN exit_code BIGINT,
  ADD COLUMN oom BIGINT NOT NULL DEFAULT 0, ADD COLUMN evidence TEXT;
UPDATE jobs j SET
  job_name = CASE WHEN coalesce(j.job_name, '') = '' THEN coalesce(h.job_name, j.job_name) ELSE j.job_name END,
  "user" = CASE WHEN coalesce(j."user", '') = '' THEN coalesce(h."user", j."user") ELSE j."user" END,
  account = CASE WHEN coalesce(j.account, '') = '' THEN coalesce(h.account, j.account) ELSE j.account END,
  class = CASE WHEN coalesce(j.class, '') = '' THEN coalesce(h.class, j.class) ELSE j.class END,
  gpu_model = CASE WHEN coalesce(j.gpu_model, '') = '' THEN coalesce(h.gpu_model, j.gpu_model) ELSE j.gpu_model END,
  gpus_per_node = greatest(j.gpus_per_node, h.gpus_per_node), nodes = greatest(j.nodes, h.nodes), gpu_mem_mib = greatest(j.gpu_mem_mib, h.gpu_mem_mib),
  job_key = h.job_key, started = h.started, ended = h.ended, exit_code = h.exit_code, oom = h.oom, evidence = h.evidence
FROM job_history h WHERE h.job_id = j.job_id;
INSERT INTO jobs(job_id, job_name, "user", account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated, job_key, started, ended, exit_code, oom, evidence)
SELECT h.job_id, h.job_name, h."user", h.account, h.class, h.gpu_model, h.gpus_per_node, h.nodes, h.gpu_mem_mib, NULL,
  h.job_key, h.started, h.ended, h.exit_code, h.oom, h.evidence
FROM job_history h WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = h.job_id);
DROP TABLE job_history;
DROP TABLE records_seen;
CREATE INDEX jobs_key ON jobs(job_key, started);

-- +goose Down
CREATE TABLE records_seen(node TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY(node, seq));
CREATE TABLE job_history(job_id TEXT PRIMARY KEY, job_key TEXT NOT NULL, "user" TEXT NOT NULL, job_name TEXT NOT NULL, account TEXT NOT NULL,
  class TEXT, gpu_model TEXT, gpus_per_node BIGINT NOT NULL, nodes BIGINT NOT NULL, gpu_mem_mib BIGINT NOT NULL,
  started BIGINT NOT NULL, ended BIGINT, exit_code BIGINT, oom BIGINT NOT NULL DEFAULT 0, evidence TEXT);
INSERT INTO job_history SELECT job_id, job_key, "user", job_name, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, started, ended, exit_code, oom, evidence
FROM jobs WHERE job_key IS NOT NULL AND started IS NOT NULL;
CREATE INDEX job_history_key ON job_history(job_key, started);
DROP INDEX jobs_key;
DELETE FROM jobs WHERE updated IS NULL;
ALTER TABLE jobs DROP COLUMN job_key, DROP COLUMN started, DROP COLUMN ended, DROP COLUMN exit_code, DROP COLUMN oom, DROP COLUMN evidence;
ALTER TABLE jobs ALTER COLUMN updated SET NOT NULL;
