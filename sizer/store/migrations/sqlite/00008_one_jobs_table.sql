-- One table per fact (issue 24): a job's request (name, owner, account,
-- class, GPUs, nodes, GPU memory) was held twice, in jobs (written when an
-- instance launches for it; updated is then) and in job_history (written
-- when it starts on a burst node under a recurring-job key, with how it
-- ended). jobs now holds both: updated is NULL for a job only seen
-- starting, job_key and started are NULL for one only seen launching.
-- A job in both keeps jobs' text columns (history's where jobs' is empty)
-- and the larger of each count. records_seen, superseded by reports_seen
-- and never written, goes.

-- +goose Up
CREATE TABLE jobs_merged(job_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT,
  gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL, updated INTEGER,
  job_key TEXT, started INTEGER, ended INTEGER, exit_code INTEGER, oom INTEGER NOT NULL DEFAULT 0, evidence TEXT);
INSERT INTO jobs_merged
SELECT j.job_id,
  CASE WHEN coalesce(j.job_name, '') = '' THEN coalesce(h.job_name, j.job_name) ELSE j.job_name END,
  CASE WHEN coalesce(j.user, '') = '' THEN coalesce(h.user, j.user) ELSE j.user END,
  CASE WHEN coalesce(j.account, '') = '' THEN coalesce(h.account, j.account) ELSE j.account END,
  CASE WHEN coalesce(j.class, '') = '' THEN coalesce(h.class, j.class) ELSE j.class END,
  CASE WHEN coalesce(j.gpu_model, '') = '' THEN coalesce(h.gpu_model, j.gpu_model) ELSE j.gpu_model END,
  max(j.gpus_per_node, coalesce(h.gpus_per_node, 0)), max(j.nodes, coalesce(h.nodes, 0)), max(j.gpu_mem_mib, coalesce(h.gpu_mem_mib, 0)), j.updated,
  h.job_key, h.started, h.ended, h.exit_code, coalesce(h.oom, 0), h.evidence
FROM jobs j LEFT JOIN job_history h ON h.job_id = j.job_id;
INSERT INTO jobs_merged
SELECT h.job_id, h.job_name, h.user, h.account, h.class, h.gpu_model, h.gpus_per_node, h.nodes, h.gpu_mem_mib, NULL,
  h.job_key, h.started, h.ended, h.exit_code, h.oom, h.evidence
FROM job_history h WHERE h.job_id NOT IN (SELECT job_id FROM jobs);
DROP TABLE jobs;
DROP TABLE job_history;
DROP TABLE records_seen;
ALTER TABLE jobs_merged RENAME TO jobs;
CREATE INDEX jobs_user_name ON jobs(user, job_name);
CREATE INDEX jobs_account_updated ON jobs(account, updated);
CREATE INDEX jobs_updated ON jobs(updated);
CREATE INDEX jobs_key ON jobs(job_key, started);

-- +goose Down
CREATE TABLE records_seen(node TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY(node, seq)) WITHOUT ROWID;
CREATE TABLE job_history(job_id TEXT PRIMARY KEY, job_key TEXT NOT NULL, user TEXT NOT NULL, job_name TEXT NOT NULL, account TEXT NOT NULL,
  class TEXT, gpu_model TEXT, gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL,
  started INTEGER NOT NULL, ended INTEGER, exit_code INTEGER, oom INTEGER NOT NULL DEFAULT 0, evidence TEXT);
INSERT INTO job_history SELECT job_id, job_key, user, job_name, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, started, ended, exit_code, oom, evidence
FROM jobs WHERE job_key IS NOT NULL AND started IS NOT NULL;
CREATE INDEX job_history_key ON job_history(job_key, started);
CREATE TABLE jobs_split(job_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT, gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL, updated INTEGER NOT NULL);
INSERT INTO jobs_split SELECT job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated FROM jobs WHERE updated IS NOT NULL;
DROP TABLE jobs;
ALTER TABLE jobs_split RENAME TO jobs;
CREATE INDEX jobs_user_name ON jobs(user, job_name);
CREATE INDEX jobs_account_updated ON jobs(account, updated);
CREATE INDEX jobs_updated ON jobs(updated);
