-- The usage change log (issue 30), as SQLite's 00014: every write of a
-- job's row or of its per-node usage (job_node, written with every GPU
-- sample and summary beside job_gpu) names the job, so sizer/usage.Reader
-- re-reads only the jobs that changed. Pruned with the ledger's change
-- log; store copy leaves it out.

-- +goose Up
CREATE TABLE usage_changes(seq BIGSERIAL PRIMARY KEY, cluster TEXT NOT NULL, job_id TEXT NOT NULL, at BIGINT NOT NULL);
CREATE INDEX usage_changes_at ON usage_changes(at);
-- +goose StatementBegin
CREATE FUNCTION burst_log_usage_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO usage_changes(cluster, job_id, at) VALUES(OLD.cluster, OLD.job_id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  ELSE
    INSERT INTO usage_changes(cluster, job_id, at) VALUES(NEW.cluster, NEW.job_id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  END IF;
  RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER jobs_usage_log AFTER INSERT OR UPDATE OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION burst_log_usage_change();
CREATE TRIGGER job_node_usage_log AFTER INSERT OR UPDATE OR DELETE ON job_node FOR EACH ROW EXECUTE FUNCTION burst_log_usage_change();

-- +goose Down
DROP TRIGGER jobs_usage_log ON jobs;
DROP TRIGGER job_node_usage_log ON job_node;
DROP FUNCTION burst_log_usage_change();
DROP INDEX usage_changes_at;
DROP TABLE usage_changes;
