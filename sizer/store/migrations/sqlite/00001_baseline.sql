-- The schema as burst-sizer created it before versioned migrations
-- (CREATE ... IF NOT EXISTS, so a database from before them is adopted as
-- it is: Open first adds the instances columns an older file lacks).

-- +goose Up
CREATE TABLE IF NOT EXISTS records_seen(node TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY(node, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_gpu(job_id TEXT NOT NULL, node TEXT NOT NULL, gpu INTEGER NOT NULL, samples INTEGER NOT NULL, util_sum REAL NOT NULL, mem_peak INTEGER NOT NULL, mem_total INTEGER NOT NULL, PRIMARY KEY(job_id, node, gpu)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_node(job_id TEXT NOT NULL, node TEXT NOT NULL, peak_mem INTEGER NOT NULL DEFAULT 0, first_ts INTEGER, last_ts INTEGER, summary TEXT, PRIMARY KEY(job_id, node)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs(job_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT, gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL, updated INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_user_name ON jobs(user, job_name);
CREATE TABLE IF NOT EXISTS instances(instance_id TEXT PRIMARY KEY, node TEXT, instance_type TEXT, zone TEXT, capacity TEXT, price REAL NOT NULL, account TEXT, job_id TEXT, launched INTEGER NOT NULL, terminated INTEGER,
  user TEXT NOT NULL DEFAULT '', class TEXT NOT NULL DEFAULT '', client_token TEXT NOT NULL DEFAULT '', od_price REAL NOT NULL DEFAULT 0, price_source TEXT NOT NULL DEFAULT '',
  source TEXT NOT NULL DEFAULT 'resume', end_source TEXT NOT NULL DEFAULT '', end_reason TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS instances_launched ON instances(launched);
CREATE TABLE IF NOT EXISTS interruptions(instance_id TEXT NOT NULL, node TEXT, instance_type TEXT, zone TEXT, action TEXT, ts INTEGER NOT NULL, PRIMARY KEY(instance_id, ts));
CREATE TABLE IF NOT EXISTS job_decisions(job_id TEXT PRIMARY KEY, ts INTEGER NOT NULL, class TEXT, instance_type TEXT, zone TEXT, capacity TEXT,
  price REAL, expected REAL, reason TEXT, offerings INTEGER, avoided INTEGER, comment TEXT);
CREATE TABLE IF NOT EXISTS job_attempts(job_id TEXT NOT NULL, attempt INTEGER NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY(job_id, attempt)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS interruption_jobs(instance_id TEXT NOT NULL, ts INTEGER NOT NULL, job_id TEXT NOT NULL, signal TEXT, checkpointed INTEGER NOT NULL,
  requeued INTEGER NOT NULL, waited_ms INTEGER NOT NULL, error TEXT, PRIMARY KEY(instance_id, ts, job_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS node_seen(node TEXT PRIMARY KEY, instance_id TEXT, last_ts INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_account_updated ON jobs(account, updated);
CREATE INDEX IF NOT EXISTS jobs_updated ON jobs(updated);
CREATE INDEX IF NOT EXISTS instances_job ON instances(job_id);
CREATE INDEX IF NOT EXISTS instances_terminated ON instances(terminated);
CREATE TABLE IF NOT EXISTS node_identities(instance_id TEXT PRIMARY KEY, node TEXT NOT NULL, nonce TEXT NOT NULL,
 instance_type TEXT NOT NULL, zone TEXT NOT NULL, lifecycle TEXT NOT NULL, pending INTEGER NOT NULL,
 first_issued INTEGER NOT NULL, last_issued INTEGER NOT NULL, expires INTEGER NOT NULL, revoked INTEGER, revoke_reason TEXT);
CREATE INDEX IF NOT EXISTS node_identities_node ON node_identities(node);
CREATE TABLE IF NOT EXISTS reports_seen(instance TEXT NOT NULL, node TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY(instance, node, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_history(job_id TEXT PRIMARY KEY, job_key TEXT NOT NULL, user TEXT NOT NULL, job_name TEXT NOT NULL, account TEXT NOT NULL,
  class TEXT, gpu_model TEXT, gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL,
  started INTEGER NOT NULL, ended INTEGER, exit_code INTEGER, oom INTEGER NOT NULL DEFAULT 0, evidence TEXT);
CREATE INDEX IF NOT EXISTS job_history_key ON job_history(job_key, started);
CREATE TABLE IF NOT EXISTS instance_states(instance_id TEXT NOT NULL, state TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY(instance_id, state, at)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_runs(job_id TEXT NOT NULL, node TEXT NOT NULL, account TEXT NOT NULL DEFAULT '', user TEXT NOT NULL DEFAULT '', gpus INTEGER NOT NULL DEFAULT 0, start INTEGER NOT NULL, end INTEGER, PRIMARY KEY(job_id, node, start)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_runs_node ON job_runs(node, start);
CREATE TABLE IF NOT EXISTS launch_intents(client_token TEXT NOT NULL, at INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY(client_token, at)) WITHOUT ROWID;

-- +goose Down
-- The baseline is never rolled back: it holds the spend ledger.
SELECT 1;
