-- The Slurm cluster (cluster.name) whose sizer recorded each instance's
-- launch: on a database several clusters share, each cluster's ledger
-- sync settles only its own instances against its own EC2 view. Rows
-- from before this are cluster '' (every cluster's sync may settle them).

-- +goose Up
ALTER TABLE instances ADD COLUMN cluster TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE instances DROP COLUMN cluster;
