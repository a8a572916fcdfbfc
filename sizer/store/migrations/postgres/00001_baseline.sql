-- The baseline schema on PostgreSQL: the same tables as SQLite's baseline,
-- with 64-bit integers (millisecond times) and double precision prices.

-- +goose Up
CREATE TABLE records_seen(node TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY(node, seq));
CREATE TABLE job_gpu(job_id TEXT NOT NULL, node TEXT NOT NULL, gpu BIGINT NOT NULL, samples BIGINT NOT NULL, util_sum DOUBLE PRECISION NOT NULL, mem_peak BIGINT NOT NULL, mem_total BIGINT NOT NULL, PRIMARY KEY(job_id, node, gpu));
CREATE TABLE job_node(job_id TEXT NOT NULL, node TEXT NOT NULL, peak_mem BIGINT NOT NULL DEFAULT 0, first_ts BIGINT, last_ts BIGINT, summary TEXT, PRIMARY KEY(job_id, node));
CREATE TABLE jobs(job_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, "user" TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT, gpus_per_node BIGINT NOT NULL, nodes BIGINT NOT NULL, gpu_mem_mib BIGINT NOT NULL, updated BIGINT NOT NULL);
CREATE INDEX jobs_user_name ON jobs("user", job_name);
CREATE TABLE instances(instance_id TEXT PRIMARY KEY, node TEXT, instance_type TEXT, zone TEXT, capacity TEXT, price DOUBLE PRECISION NOT NULL, account TEXT, job_id TEXT, launched BIGINT NOT NULL, terminated BIGINT,
  "user" TEXT NOT NULL DEFAULT '', class TEXT NOT NULL DEFAULT '', client_token TEXT NOT NULL DEFAULT '', od_price DOUBLE PRECISION NOT NULL DEFAULT 0, price_source TEXT NOT NULL DEFAULT '',
  source TEXT NOT NULL DEFAULT 'resume', end_source TEXT NOT NULL DEFAULT '', end_reason TEXT NOT NULL DEFAULT '');
CREATE INDEX instances_launched ON instances(launched);
CREATE TABLE interruptions(instance_id TEXT NOT NULL, node TEXT, instance_type TEXT, zone TEXT, action TEXT, ts BIGINT NOT NULL, PRIMARY KEY(instance_id, ts));
CREATE TABLE job_decisions(job_id TEXT PRIMARY KEY, ts BIGINT NOT NULL, class TEXT, instance_type TEXT, zone TEXT, capacity TEXT,
  price DOUBLE PRECISION, expected DOUBLE PRECISION, reason TEXT, offerings BIGINT, avoided BIGINT, comment TEXT);
CREATE TABLE job_attempts(job_id TEXT NOT NULL, attempt BIGINT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY(job_id, attempt));
CREATE TABLE interruption_jobs(instance_id TEXT NOT NULL, ts BIGINT NOT NULL, job_id TEXT NOT NULL, signal TEXT, checkpointed BIGINT NOT NULL,
  requeued BIGINT NOT NULL, waited_ms BIGINT NOT NULL, error TEXT, PRIMARY KEY(instance_id, ts, job_id));
CREATE TABLE node_seen(node TEXT PRIMARY KEY, instance_id TEXT, last_ts BIGINT NOT NULL);
CREATE INDEX jobs_account_updated ON jobs(account, updated);
CREATE INDEX jobs_updated ON jobs(updated);
CREATE INDEX instances_job ON instances(job_id);
CREATE INDEX instances_terminated ON instances(terminated);
CREATE TABLE node_identities(instance_id TEXT PRIMARY KEY, node TEXT NOT NULL, nonce TEXT NOT NULL,
 instance_type TEXT NOT NULL, zone TEXT NOT NULL, lifecycle TEXT NOT NULL, pending BIGINT NOT NULL,
 first_issued BIGINT NOT NULL, last_issued BIGINT NOT NULL, expires BIGINT NOT NULL, revoked BIGINT, revoke_reason TEXT);
CREATE INDEX node_identities_node ON node_identities(node);
CREATE TABLE reports_seen(instance TEXT NOT NULL, node TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY(instance, node, seq));
CREATE TABLE job_history(job_id TEXT PRIMARY KEY, job_key TEXT NOT NULL, "user" TEXT NOT NULL, job_name TEXT NOT NULL, account TEXT NOT NULL,
  class TEXT, gpu_model TEXT, gpus_per_node BIGINT NOT NULL, nodes BIGINT NOT NULL, gpu_mem_mib BIGINT NOT NULL,
  started BIGINT NOT NULL, ended BIGINT, exit_code BIGINT, oom BIGINT NOT NULL DEFAULT 0, evidence TEXT);
CREATE INDEX job_history_key ON job_history(job_key, started);
CREATE TABLE instance_states(instance_id TEXT NOT NULL, state TEXT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY(instance_id, state, at));
CREATE TABLE job_runs(job_id TEXT NOT NULL, node TEXT NOT NULL, account TEXT NOT NULL DEFAULT '', "user" TEXT NOT NULL DEFAULT '', gpus BIGINT NOT NULL DEFAULT 0, start BIGINT NOT NULL, "end" BIGINT, PRIMARY KEY(job_id, node, start));
CREATE INDEX job_runs_node ON job_runs(node, start);
CREATE TABLE launch_intents(client_token TEXT NOT NULL, at BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY(client_token, at));

-- +goose Down
-- The baseline is never rolled back: it holds the spend ledger.
SELECT 1;
