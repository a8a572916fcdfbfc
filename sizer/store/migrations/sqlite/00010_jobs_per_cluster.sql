-- Job ids are Slurm's, so two clusters sharing a database (PostgreSQL)
-- both have a job 5: every table keyed by a job id is keyed by the Slurm
-- cluster (cluster.name) too. The column comes last, as PostgreSQL's ADD
-- COLUMN puts it (store copy compares rows column by column). Rows from
-- before this are cluster ''; the next migration (a Go one, migrate.go)
-- gives them to the cluster of the sizer that migrates first. Down keeps,
-- of a job id that several clusters have, the row of the first cluster by
-- name: the old key cannot hold the others.

-- +goose Up
CREATE TABLE jobs_c(job_id TEXT NOT NULL, job_name TEXT NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT,
  gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL, updated INTEGER,
  job_key TEXT, started INTEGER, ended INTEGER, exit_code INTEGER, oom INTEGER NOT NULL DEFAULT 0, evidence TEXT,
  cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, job_id));
INSERT INTO jobs_c SELECT *, '' FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_c RENAME TO jobs;
CREATE INDEX jobs_user_name ON jobs(user, job_name);
CREATE INDEX jobs_account_updated ON jobs(account, updated);
CREATE INDEX jobs_updated ON jobs(updated);
CREATE INDEX jobs_key ON jobs(job_key, started);

CREATE TABLE job_runs_c(job_id TEXT NOT NULL, node TEXT NOT NULL, account TEXT NOT NULL DEFAULT '', user TEXT NOT NULL DEFAULT '', gpus INTEGER NOT NULL DEFAULT 0,
  start INTEGER NOT NULL, end INTEGER, cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, job_id, node, start)) WITHOUT ROWID;
INSERT INTO job_runs_c SELECT *, '' FROM job_runs;
DROP TABLE job_runs;
ALTER TABLE job_runs_c RENAME TO job_runs;
CREATE INDEX job_runs_node ON job_runs(node, start);
-- +goose StatementBegin
CREATE TRIGGER job_runs_insert_log AFTER INSERT ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(NEW.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER job_runs_update_log AFTER UPDATE ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(NEW.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER job_runs_delete_log AFTER DELETE ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(OLD.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd

CREATE TABLE job_decisions_c(job_id TEXT NOT NULL, ts INTEGER NOT NULL, class TEXT, instance_type TEXT, zone TEXT, capacity TEXT,
  price REAL, expected REAL, reason TEXT, offerings INTEGER, avoided INTEGER, comment TEXT, cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, job_id));
INSERT INTO job_decisions_c SELECT *, '' FROM job_decisions;
DROP TABLE job_decisions;
ALTER TABLE job_decisions_c RENAME TO job_decisions;

CREATE TABLE job_attempts_c(job_id TEXT NOT NULL, attempt INTEGER NOT NULL, ts INTEGER NOT NULL, cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, job_id, attempt)) WITHOUT ROWID;
INSERT INTO job_attempts_c SELECT *, '' FROM job_attempts;
DROP TABLE job_attempts;
ALTER TABLE job_attempts_c RENAME TO job_attempts;

CREATE TABLE job_gpu_c(job_id TEXT NOT NULL, node TEXT NOT NULL, gpu INTEGER NOT NULL, samples INTEGER NOT NULL, util_sum REAL NOT NULL, mem_peak INTEGER NOT NULL, mem_total INTEGER NOT NULL,
  cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, job_id, node, gpu)) WITHOUT ROWID;
INSERT INTO job_gpu_c SELECT *, '' FROM job_gpu;
DROP TABLE job_gpu;
ALTER TABLE job_gpu_c RENAME TO job_gpu;

CREATE TABLE job_node_c(job_id TEXT NOT NULL, node TEXT NOT NULL, peak_mem INTEGER NOT NULL DEFAULT 0, first_ts INTEGER, last_ts INTEGER, summary TEXT,
  cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, job_id, node)) WITHOUT ROWID;
INSERT INTO job_node_c SELECT *, '' FROM job_node;
DROP TABLE job_node;
ALTER TABLE job_node_c RENAME TO job_node;

CREATE TABLE interruption_jobs_c(instance_id TEXT NOT NULL, ts INTEGER NOT NULL, job_id TEXT NOT NULL, signal TEXT, checkpointed INTEGER NOT NULL,
  requeued INTEGER NOT NULL, waited_ms INTEGER NOT NULL, error TEXT, cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY(cluster, instance_id, ts, job_id)) WITHOUT ROWID;
INSERT INTO interruption_jobs_c SELECT *, '' FROM interruption_jobs;
DROP TABLE interruption_jobs;
ALTER TABLE interruption_jobs_c RENAME TO interruption_jobs;

-- +goose Down
CREATE TABLE jobs_o(job_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT,
  gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL, updated INTEGER,
  job_key TEXT, started INTEGER, ended INTEGER, exit_code INTEGER, oom INTEGER NOT NULL DEFAULT 0, evidence TEXT);
INSERT OR IGNORE INTO jobs_o SELECT job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated,
  job_key, started, ended, exit_code, oom, evidence FROM jobs ORDER BY cluster;
DROP TABLE jobs;
ALTER TABLE jobs_o RENAME TO jobs;
CREATE INDEX jobs_user_name ON jobs(user, job_name);
CREATE INDEX jobs_account_updated ON jobs(account, updated);
CREATE INDEX jobs_updated ON jobs(updated);
CREATE INDEX jobs_key ON jobs(job_key, started);

CREATE TABLE job_runs_o(job_id TEXT NOT NULL, node TEXT NOT NULL, account TEXT NOT NULL DEFAULT '', user TEXT NOT NULL DEFAULT '', gpus INTEGER NOT NULL DEFAULT 0,
  start INTEGER NOT NULL, end INTEGER, PRIMARY KEY(job_id, node, start)) WITHOUT ROWID;
INSERT OR IGNORE INTO job_runs_o SELECT job_id, node, account, user, gpus, start, end FROM job_runs ORDER BY cluster;
DROP TABLE job_runs;
ALTER TABLE job_runs_o RENAME TO job_runs;
CREATE INDEX job_runs_node ON job_runs(node, start);
-- +goose StatementBegin
CREATE TRIGGER job_runs_insert_log AFTER INSERT ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(NEW.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER job_runs_update_log AFTER UPDATE ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(NEW.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER job_runs_delete_log AFTER DELETE ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(OLD.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd

CREATE TABLE job_decisions_o(job_id TEXT PRIMARY KEY, ts INTEGER NOT NULL, class TEXT, instance_type TEXT, zone TEXT, capacity TEXT,
  price REAL, expected REAL, reason TEXT, offerings INTEGER, avoided INTEGER, comment TEXT);
INSERT OR IGNORE INTO job_decisions_o SELECT job_id, ts, class, instance_type, zone, capacity, price, expected, reason, offerings, avoided, comment FROM job_decisions ORDER BY cluster;
DROP TABLE job_decisions;
ALTER TABLE job_decisions_o RENAME TO job_decisions;

CREATE TABLE job_attempts_o(job_id TEXT NOT NULL, attempt INTEGER NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY(job_id, attempt)) WITHOUT ROWID;
INSERT OR IGNORE INTO job_attempts_o SELECT job_id, attempt, ts FROM job_attempts ORDER BY cluster;
DROP TABLE job_attempts;
ALTER TABLE job_attempts_o RENAME TO job_attempts;

CREATE TABLE job_gpu_o(job_id TEXT NOT NULL, node TEXT NOT NULL, gpu INTEGER NOT NULL, samples INTEGER NOT NULL, util_sum REAL NOT NULL, mem_peak INTEGER NOT NULL, mem_total INTEGER NOT NULL,
  PRIMARY KEY(job_id, node, gpu)) WITHOUT ROWID;
INSERT OR IGNORE INTO job_gpu_o SELECT job_id, node, gpu, samples, util_sum, mem_peak, mem_total FROM job_gpu ORDER BY cluster;
DROP TABLE job_gpu;
ALTER TABLE job_gpu_o RENAME TO job_gpu;

CREATE TABLE job_node_o(job_id TEXT NOT NULL, node TEXT NOT NULL, peak_mem INTEGER NOT NULL DEFAULT 0, first_ts INTEGER, last_ts INTEGER, summary TEXT, PRIMARY KEY(job_id, node)) WITHOUT ROWID;
INSERT OR IGNORE INTO job_node_o SELECT job_id, node, peak_mem, first_ts, last_ts, summary FROM job_node ORDER BY cluster;
DROP TABLE job_node;
ALTER TABLE job_node_o RENAME TO job_node;

CREATE TABLE interruption_jobs_o(instance_id TEXT NOT NULL, ts INTEGER NOT NULL, job_id TEXT NOT NULL, signal TEXT, checkpointed INTEGER NOT NULL,
  requeued INTEGER NOT NULL, waited_ms INTEGER NOT NULL, error TEXT, PRIMARY KEY(instance_id, ts, job_id)) WITHOUT ROWID;
INSERT OR IGNORE INTO interruption_jobs_o SELECT instance_id, ts, job_id, signal, checkpointed, requeued, waited_ms, error FROM interruption_jobs ORDER BY cluster;
DROP TABLE interruption_jobs;
ALTER TABLE interruption_jobs_o RENAME TO interruption_jobs;
