-- The ledger's change log (issue 30): every insert, update or delete of an
-- instance or its state events names the instance, and of a job run names
-- its node, so a reader that keeps the month's ledger in memory
-- (sizer/spend.Reader) re-reads only what changed since the last change it
-- saw, whichever sizer or cluster wrote it. Entries older than a day are
-- pruned (the leader's ledger sync); a reader further behind than that reads the month again. store
-- copy leaves the table out (it is derived).

-- +goose Up
-- instances by node: a job run's change, and a job's spend, re-read the
-- instances of its node
CREATE INDEX instances_node ON instances(node, launched);
CREATE TABLE ledger_changes(seq BIGSERIAL PRIMARY KEY, instance_id TEXT, node TEXT, at BIGINT NOT NULL);
CREATE INDEX ledger_changes_at ON ledger_changes(at); -- the leader's ledger sync prunes by age
-- +goose StatementBegin
CREATE FUNCTION burst_log_instance_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO ledger_changes(instance_id, at) VALUES(OLD.instance_id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  ELSE
    INSERT INTO ledger_changes(instance_id, at) VALUES(NEW.instance_id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  END IF;
  RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION burst_log_node_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO ledger_changes(node, at) VALUES(OLD.node, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  ELSE
    INSERT INTO ledger_changes(node, at) VALUES(NEW.node, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  END IF;
  RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER instances_log AFTER INSERT OR UPDATE OR DELETE ON instances FOR EACH ROW EXECUTE FUNCTION burst_log_instance_change();
CREATE TRIGGER instance_states_log AFTER INSERT OR UPDATE OR DELETE ON instance_states FOR EACH ROW EXECUTE FUNCTION burst_log_instance_change();
CREATE TRIGGER job_runs_log AFTER INSERT OR UPDATE OR DELETE ON job_runs FOR EACH ROW EXECUTE FUNCTION burst_log_node_change();

-- +goose Down
DROP INDEX ledger_changes_at;
DROP INDEX instances_node;
DROP TRIGGER instances_log ON instances;
DROP TRIGGER instance_states_log ON instance_states;
DROP TRIGGER job_runs_log ON job_runs;
DROP FUNCTION burst_log_instance_change();
DROP FUNCTION burst_log_node_change();
DROP TABLE ledger_changes;
