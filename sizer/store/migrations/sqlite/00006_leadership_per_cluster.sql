-- One leader per Slurm cluster (cluster.name) on a database several
-- clusters share: the leadership row is keyed by cluster. The row before
-- it becomes cluster '' (its epoch kept).

-- +goose Up
CREATE TABLE leadership_by_cluster(cluster TEXT PRIMARY KEY, epoch INTEGER NOT NULL, holder TEXT NOT NULL, since INTEGER NOT NULL);
INSERT INTO leadership_by_cluster(cluster, epoch, holder, since) SELECT '', epoch, holder, since FROM leadership;
DROP TABLE leadership;
ALTER TABLE leadership_by_cluster RENAME TO leadership;

-- +goose Down
CREATE TABLE leadership_one(id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL, holder TEXT NOT NULL, since INTEGER NOT NULL);
INSERT INTO leadership_one(id, epoch, holder, since) SELECT 1, epoch, holder, since FROM leadership ORDER BY epoch DESC LIMIT 1;
DROP TABLE leadership;
ALTER TABLE leadership_one RENAME TO leadership;
