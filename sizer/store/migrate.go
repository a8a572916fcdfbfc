package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// The schema is versioned by goose migrations, one directory of SQL files
// per driver (migrations/sqlite, migrations/postgres) with the same
// version numbers: a table added later is a new numbered file in both.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// VersionTable is goose's table of applied migrations.
const VersionTable = "goose_db_version"

// jobsAdopted is the Go migration after 00010 (the cluster in every
// per-job table's key): the rows from before it, cluster ”, become the
// cluster's of the sizer that migrates (cluster.name), with its instances
// from before migration 00007. It runs once, on the first sizer to
// migrate: on a database several clusters already shared, that cluster
// takes every earlier job row (they were mixed up before). Down leaves
// the rows as they are.
const jobsAdopted = 11

// perJobTables are the tables keyed by a Slurm job id and its cluster.
var perJobTables = []string{"jobs", "job_runs", "job_decisions", "job_attempts", "job_gpu", "job_node", "interruption_jobs"}

func adoptJobs(cluster string) *goose.Migration {
	up := &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		if cluster == "" {
			return nil
		}
		for _, t := range append([]string{"instances"}, perJobTables...) {
			q := `UPDATE ` + t + ` SET cluster = ` + quoteLiteral(cluster) + ` WHERE cluster = ''`
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("giving %s's rows from before clusters were kept to cluster %q: %w", t, cluster, err)
			}
		}
		return nil
	}}
	return goose.NewGoMigration(jobsAdopted, up, &goose.GoFunc{RunTx: func(context.Context, *sql.Tx) error { return nil }})
}

// quoteLiteral is s as an SQL string literal (both drivers).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func provider(sdb *sql.DB, driver string) (*goose.Provider, error) {
	return providerFor(sdb, driver, "")
}

// providerFor is the schema's migrations, the Go one giving the rows from
// before clusters were kept to cluster.
func providerFor(sdb *sql.DB, driver, cluster string) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations/"+driver)
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true), goose.WithSlog(slog.New(slog.DiscardHandler)), goose.WithGoMigrations(adoptJobs(cluster))}
	dialect := goose.DialectSQLite3
	if driver == DriverPostgres {
		dialect = goose.DialectPostgres
		// two sizers starting at once migrate one after the other
		l, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(l))
	}
	return goose.NewProvider(dialect, sdb, sub, opts...)
}

// migrate brings the schema to the newest version.
func migrate(ctx context.Context, sdb *sql.DB, driver, cluster string) error {
	if driver == DriverSQLite {
		if err := adoptLegacy(ctx, sdb); err != nil {
			return err
		}
	}
	p, err := providerFor(sdb, driver, cluster)
	if err != nil {
		return fmt.Errorf("loading the schema migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrating the schema: %w", err)
	}
	return nil
}

// SchemaVersion is the store's applied and newest schema versions.
func (s *Store) SchemaVersion(ctx context.Context) (current, newest int64, err error) {
	if s.w == nil {
		return 0, 0, ErrReadOnly
	}
	p, err := provider(s.w.DB, s.driver)
	if err != nil {
		return 0, 0, err
	}
	return p.GetVersions(ctx)
}

// legacyColumns are the instances columns added in place before the
// schema was versioned (the baseline migration has them).
var legacyColumns = [][2]string{
	{"user", "TEXT NOT NULL DEFAULT ''"},
	{"class", "TEXT NOT NULL DEFAULT ''"},
	{"client_token", "TEXT NOT NULL DEFAULT ''"},
	{"od_price", "REAL NOT NULL DEFAULT 0"},
	{"price_source", "TEXT NOT NULL DEFAULT ''"},
	{"source", "TEXT NOT NULL DEFAULT 'resume'"},
	{"end_source", "TEXT NOT NULL DEFAULT ''"},
	{"end_reason", "TEXT NOT NULL DEFAULT ''"},
}

// adoptLegacy brings a SQLite database from before versioned migrations
// (tables, no version table) to the baseline's shape: the baseline's
// CREATE ... IF NOT EXISTS then leaves its tables and rows as they are.
func adoptLegacy(ctx context.Context, sdb *sql.DB) error {
	var n int
	if err := sdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('instances', ?)`, VersionTable).Scan(&n); err != nil {
		return err
	}
	var hasVersions int
	if err := sdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, VersionTable).Scan(&hasVersions); err != nil {
		return err
	}
	if n == 0 || hasVersions == 1 {
		return nil // new, or already versioned
	}
	rows, err := sdb.QueryContext(ctx, `PRAGMA table_info(instances)`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var cid, notnull, pk int
		var name, typ string
		var dflt sql.NullString
		if err := rows.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range legacyColumns {
		if !have[c[0]] {
			if _, err := sdb.ExecContext(ctx, fmt.Sprintf("ALTER TABLE instances ADD COLUMN %s %s", c[0], c[1])); err != nil {
				return fmt.Errorf("adding instances.%s to a database from before versioned migrations: %w", c[0], err)
			}
		}
	}
	return nil
}
