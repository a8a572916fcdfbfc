-- Job ids are Slurm's, so two clusters sharing the database both have a
-- job 5: every table keyed by a job id is keyed by the Slurm cluster
-- (cluster.name) too, as SQLite's 00010. Rows from before this are
-- cluster ''; the next migration (a Go one, migrate.go) gives them to the
-- cluster of the sizer that migrates first. Down keeps, of a job id that
-- several clusters have, the row of the first cluster by name: the old key
-- cannot hold the others.

-- +goose Up
ALTER TABLE jobs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs DROP CONSTRAINT jobs_pkey, ADD PRIMARY KEY(cluster, job_id);
ALTER TABLE job_runs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE job_runs DROP CONSTRAINT job_runs_pkey, ADD PRIMARY KEY(cluster, job_id, node, start);
ALTER TABLE job_decisions ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE job_decisions DROP CONSTRAINT job_decisions_pkey, ADD PRIMARY KEY(cluster, job_id);
ALTER TABLE job_attempts ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_pkey, ADD PRIMARY KEY(cluster, job_id, attempt);
ALTER TABLE job_gpu ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE job_gpu DROP CONSTRAINT job_gpu_pkey, ADD PRIMARY KEY(cluster, job_id, node, gpu);
ALTER TABLE job_node ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE job_node DROP CONSTRAINT job_node_pkey, ADD PRIMARY KEY(cluster, job_id, node);
ALTER TABLE interruption_jobs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE interruption_jobs DROP CONSTRAINT interruption_jobs_pkey, ADD PRIMARY KEY(cluster, instance_id, ts, job_id);

-- +goose Down
DELETE FROM jobs t WHERE EXISTS (SELECT 1 FROM jobs o WHERE o.job_id = t.job_id AND o.cluster < t.cluster);
ALTER TABLE jobs DROP CONSTRAINT jobs_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(job_id);
DELETE FROM job_runs t WHERE EXISTS (SELECT 1 FROM job_runs o WHERE o.job_id = t.job_id AND o.node = t.node AND o.start = t.start AND o.cluster < t.cluster);
ALTER TABLE job_runs DROP CONSTRAINT job_runs_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(job_id, node, start);
DELETE FROM job_decisions t WHERE EXISTS (SELECT 1 FROM job_decisions o WHERE o.job_id = t.job_id AND o.cluster < t.cluster);
ALTER TABLE job_decisions DROP CONSTRAINT job_decisions_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(job_id);
DELETE FROM job_attempts t WHERE EXISTS (SELECT 1 FROM job_attempts o WHERE o.job_id = t.job_id AND o.attempt = t.attempt AND o.cluster < t.cluster);
ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(job_id, attempt);
DELETE FROM job_gpu t WHERE EXISTS (SELECT 1 FROM job_gpu o WHERE o.job_id = t.job_id AND o.node = t.node AND o.gpu = t.gpu AND o.cluster < t.cluster);
ALTER TABLE job_gpu DROP CONSTRAINT job_gpu_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(job_id, node, gpu);
DELETE FROM job_node t WHERE EXISTS (SELECT 1 FROM job_node o WHERE o.job_id = t.job_id AND o.node = t.node AND o.cluster < t.cluster);
ALTER TABLE job_node DROP CONSTRAINT job_node_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(job_id, node);
DELETE FROM interruption_jobs t WHERE EXISTS (SELECT 1 FROM interruption_jobs o WHERE o.instance_id = t.instance_id AND o.ts = t.ts AND o.job_id = t.job_id AND o.cluster < t.cluster);
ALTER TABLE interruption_jobs DROP CONSTRAINT interruption_jobs_pkey, DROP COLUMN cluster, ADD PRIMARY KEY(instance_id, ts, job_id);
