-- The ledger's change log (issue 30): every insert, update or delete of an
-- instance or its state events names the instance, and of a job run names
-- its node, so a reader that keeps the month's ledger in memory
-- (sizer/spend.Reader) re-reads only what changed since the last change it
-- saw instead of the whole month. Entries older than a day are pruned; a
-- reader further behind than that reads the month again. store copy leaves
-- the table out (it is derived).

-- +goose Up
-- instances by node: a job run's change, and a job's spend, re-read the
-- instances of its node
CREATE INDEX IF NOT EXISTS instances_node ON instances(node, launched);
CREATE TABLE IF NOT EXISTS ledger_changes(seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT, node TEXT, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_changes_at ON ledger_changes(at); -- the leader's ledger sync prunes by age
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS instances_insert_log AFTER INSERT ON instances BEGIN INSERT INTO ledger_changes(instance_id, at) VALUES(NEW.instance_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS instances_update_log AFTER UPDATE ON instances BEGIN INSERT INTO ledger_changes(instance_id, at) VALUES(NEW.instance_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS instances_delete_log AFTER DELETE ON instances BEGIN INSERT INTO ledger_changes(instance_id, at) VALUES(OLD.instance_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS instance_states_insert_log AFTER INSERT ON instance_states BEGIN INSERT INTO ledger_changes(instance_id, at) VALUES(NEW.instance_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS instance_states_update_log AFTER UPDATE ON instance_states BEGIN INSERT INTO ledger_changes(instance_id, at) VALUES(NEW.instance_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS instance_states_delete_log AFTER DELETE ON instance_states BEGIN INSERT INTO ledger_changes(instance_id, at) VALUES(OLD.instance_id, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS job_runs_insert_log AFTER INSERT ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(NEW.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS job_runs_update_log AFTER UPDATE ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(NEW.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS job_runs_delete_log AFTER DELETE ON job_runs BEGIN INSERT INTO ledger_changes(node, at) VALUES(OLD.node, CAST(unixepoch('subsec') * 1000 AS INTEGER)); END;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS ledger_changes_at;
DROP INDEX IF EXISTS instances_node;
DROP TRIGGER IF EXISTS instances_insert_log;
DROP TRIGGER IF EXISTS instances_update_log;
DROP TRIGGER IF EXISTS instances_delete_log;
DROP TRIGGER IF EXISTS instance_states_insert_log;
DROP TRIGGER IF EXISTS instance_states_update_log;
DROP TRIGGER IF EXISTS instance_states_delete_log;
DROP TRIGGER IF EXISTS job_runs_insert_log;
DROP TRIGGER IF EXISTS job_runs_update_log;
DROP TRIGGER IF EXISTS job_runs_delete_log;
DROP TABLE ledger_changes;
