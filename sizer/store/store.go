// Package store is burst-sizer's state: an embedded SQLite database (the
// pure-Go modernc.org/sqlite driver) in the state directory holding agent
// reports (deduplicated by node and sequence number), per-job GPU usage,
// jobs' owners, instance launches and terminations (for spend) and spot
// interruptions.
//
// Every write is one transaction, committed (synchronous=FULL, WAL) before
// the call returns, so a report the server acknowledged survives a crash or
// shutdown.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// FileName is the database file inside the state directory.
const FileName = "sizer.db"

// ErrNoState is returned by OpenReadOnly when the database does not exist.
var ErrNoState = errors.New("no sizer state database")

// Store is the sizer's database. Safe for concurrent use.
type Store struct {
	w      *db // SQLite: one connection (one writer); PostgreSQL: the pool
	r      *db // readers (PostgreSQL: the same pool as w)
	path   string
	driver string

	// Group commit for agent reports: concurrent AddBatch calls share one
	// transaction (one fsync), each batch inside its own savepoint.
	group bool
	// acceptSim applies simulated GPU reports to usage (a test stack only:
	// sizer.accept_simulated_gpus); otherwise they are counted and ignored.
	acceptSim bool
	// cluster is the Slurm cluster this sizer serves (cluster.name),
	// recorded with each launch.
	cluster string
	wmu     sync.RWMutex
	closed  bool
	wq      chan batchReq
	wdone   chan struct{}
}

type batchReq struct {
	b   sizerapi.ReportBatch
	out chan batchRes
}

type batchRes struct {
	r   sizerapi.ReportResult
	err error
}

// MaxGroup is the most report batches committed in one transaction.
const MaxGroup = 128

// Option changes how Open sets the store up.
type Option func(*Store)

// WithoutGroupCommit commits every report batch in its own transaction
// (the baseline the group-commit benchmark compares against).
func WithoutGroupCommit() Option { return func(s *Store) { s.group = false } }

// ForCluster records launches as cluster name's (cluster.name): on a
// database several clusters share, Unsettled (the ledger sync's work)
// holds only this cluster's instances and those recorded before.
func ForCluster(name string) Option { return func(s *Store) { s.cluster = name } }

// AcceptSimulatedGPUs makes simulated GPU reports count as usage (the test
// stack's sizer.accept_simulated_gpus); by default only NVML reports do.
func AcceptSimulatedGPUs() Option { return func(s *Store) { s.acceptSim = true } }

func dsn(path string, ro bool) string {
	q := "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	if ro {
		q = "?mode=ro&_pragma=busy_timeout(2000)&_pragma=query_only(1)"
	}
	return "file:" + path + q
}

// Open opens (creating if needed) the SQLite database in dir and migrates
// its schema. The directory is created 0700 and the database files are
// 0600.
func Open(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating sizer state directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating sizer database %s: %w", path, err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("securing sizer database %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("opening sizer database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	if err := migrate(ctx, w, DriverSQLite, clusterOf(opts)); err != nil {
		w.Close()
		if damaged(err) {
			return nil, fmt.Errorf("opening sizer database %s: the file is damaged or not a SQLite database (%w); "+
				"restore it from a backup, or move it aside (mv %s %s.damaged; also its -wal and -shm files) and burst-sizer starts a new one "+
				"(the spend ledger before it is then lost; the launch journal in the state directory is replayed)", path, err, path, path)
		}
		return nil, fmt.Errorf("creating sizer schema in %s: %w", path, err)
	}
	for _, suf := range []string{"-wal", "-shm"} {
		if err := os.Chmod(path+suf, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.Close()
			return nil, fmt.Errorf("securing %s%s: %w", path, suf, err)
		}
	}
	r, err := sql.Open("sqlite", dsn(path, false)+"&_pragma=query_only(1)&_pragma=cache_size(-32768)&_pragma=mmap_size(268435456)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("opening sizer database %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return newStore(&db{DB: w, driver: DriverSQLite}, &db{DB: r, driver: DriverSQLite}, path, opts), nil
}

// clusterOf is the cluster opts name (ForCluster), for the migration
// that gives it the rows from before clusters were kept.
func clusterOf(opts []Option) string {
	var s Store
	for _, o := range opts {
		o(&s)
	}
	return s.cluster
}

func newStore(w, r *db, path string, opts []Option) *Store {
	s := &Store{w: w, r: r, path: path, driver: w.driver, group: true}
	for _, o := range opts {
		o(s)
	}
	if s.group {
		s.wq = make(chan batchReq, MaxGroup)
		s.wdone = make(chan struct{})
		go s.writer()
	}
	return s
}

// writer commits queued report batches in groups until the queue closes.
func (s *Store) writer() {
	defer close(s.wdone)
	for first := range s.wq {
		reqs := []batchReq{first}
	drain:
		for len(reqs) < MaxGroup {
			select {
			case r, ok := <-s.wq:
				if !ok {
					break drain
				}
				reqs = append(reqs, r)
			default:
				break drain
			}
		}
		s.commitGroup(reqs)
	}
}

func (s *Store) commitGroup(reqs []batchReq) {
	ctx := context.Background()
	res := make([]batchRes, len(reqs))
	err := s.tx(ctx, func(tx *Tx) error {
		for i, rq := range reqs {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT batch"); err != nil {
				return err
			}
			r, err := s.addBatch(ctx, tx, rq.b)
			if err != nil {
				if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO batch"); rerr != nil {
					return rerr
				}
				res[i].err = fmt.Errorf("storing report batch from %s: %w", rq.b.Node, err)
			}
			res[i].r = r
			if _, err := tx.ExecContext(ctx, "RELEASE batch"); err != nil {
				return err
			}
		}
		return nil
	})
	for i, rq := range reqs {
		if err != nil {
			res[i] = batchRes{err: fmt.Errorf("storing report batch from %s: %w", rq.b.Node, err)}
		}
		rq.out <- res[i]
	}
}

// OpenReadOnly opens an existing database for reading only (burst-sizer
// route with the daemon down). It returns an error wrapping ErrNoState when
// there is none.
func OpenReadOnly(dir string) (*Store, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrNoState, path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("opening sizer database %s read-only: %w", path, err)
	}
	r.SetMaxOpenConns(2)
	return &Store{r: &db{DB: r, driver: DriverSQLite}, path: path, driver: DriverSQLite}, nil
}

// Driver is the store's driver: DriverSQLite or DriverPostgres.
func (s *Store) Driver() string { return s.driver }

// Path is the database file (SQLite), or the server's address without
// credentials (PostgreSQL).
func (s *Store) Path() string { return s.path }

// Close waits for queued report batches to commit, checkpoints the WAL and
// closes the database.
func (s *Store) Close() error {
	var errs []error
	if s.wq != nil {
		s.wmu.Lock()
		if !s.closed {
			s.closed = true
			close(s.wq)
		}
		s.wmu.Unlock()
		<-s.wdone
	}
	if s.w != nil && s.driver == DriverSQLite {
		if _, err := s.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			errs = append(errs, fmt.Errorf("checkpointing sizer database: %w", err))
		}
	}
	if s.w != nil && s.w.DB != s.r.DB {
		errs = append(errs, s.w.Close())
	}
	errs = append(errs, s.r.Close())
	return errors.Join(errs...)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// ErrReadOnly is a write to a store opened read-only.
var ErrReadOnly = errors.New("sizer database opened read-only")

func (s *Store) tx(ctx context.Context, fn func(*Tx) error) error {
	if s.w == nil {
		return ErrReadOnly
	}
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	tx := &Tx{Tx: sqlTx, driver: s.driver}
	if err := s.checkFence(ctx, tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// ErrClosed is returned for writes after Close.
var ErrClosed = errors.New("sizer store closed")

// damaged says whether err is SQLite's "file is not a database"
// (SQLITE_NOTADB) or "database disk image is malformed" (SQLITE_CORRUPT).
func damaged(err error) bool {
	var c interface{ Code() int }
	if !errors.As(err, &c) {
		return false
	}
	const corrupt, notADB = 11, 26
	return c.Code()&0xff == corrupt || c.Code()&0xff == notADB
}
