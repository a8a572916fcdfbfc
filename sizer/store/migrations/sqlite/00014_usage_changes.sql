-- The usage change log (issue 30): every write of a job's row or of its
-- per-node usage (job_node, written with every GPU sample and summary the
-- agents report, beside job_gpu) names the job, so a reader that keeps the
-- month's per-job usage in memory (sizer/usage.Reader: the dashboard's
-- right-sizing) re-reads only the jobs that changed instead of every job
-- of the month. Pruned with the ledger's change log (a day); store copy
-- leaves it out (it is derived).

-- +goose Up
CREATE TABLE IF NOT EXISTS usage_changes(seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL, job_id TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS usage_changes_at ON usage_changes(at);
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS jobs_insert_usage_log AFTER INSERT ON jobs BEGIN INSERT INTO usage_changes(cluster, job_id, at) VALUES(NEW.cluster, NEW.job_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS jobs_update_usage_log AFTER UPDATE ON jobs BEGIN INSERT INTO usage_changes(cluster, job_id, at) VALUES(NEW.cluster, NEW.job_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS jobs_delete_usage_log AFTER DELETE ON jobs BEGIN INSERT INTO usage_changes(cluster, job_id, at) VALUES(OLD.cluster, OLD.job_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS job_node_insert_usage_log AFTER INSERT ON job_node BEGIN INSERT INTO usage_changes(cluster, job_id, at) VALUES(NEW.cluster, NEW.job_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS job_node_update_usage_log AFTER UPDATE ON job_node BEGIN INSERT INTO usage_changes(cluster, job_id, at) VALUES(NEW.cluster, NEW.job_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS job_node_delete_usage_log AFTER DELETE ON job_node BEGIN INSERT INTO usage_changes(cluster, job_id, at) VALUES(OLD.cluster, OLD.job_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS jobs_insert_usage_log;
DROP TRIGGER IF EXISTS jobs_update_usage_log;
DROP TRIGGER IF EXISTS jobs_delete_usage_log;
DROP TRIGGER IF EXISTS job_node_insert_usage_log;
DROP TRIGGER IF EXISTS job_node_update_usage_log;
DROP TRIGGER IF EXISTS job_node_delete_usage_log;
DROP INDEX IF EXISTS usage_changes_at;
DROP TABLE usage_changes;
