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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/budget"
	"github.com/burst-hpc/burst/sizer/report"
)

// FileName is the database file inside the state directory.
const FileName = "sizer.db"

// BusyUtilPct: a GPU whose mean utilisation over a job is at least this
// counts as used by the job.
const BusyUtilPct = 5

// ErrNoState is returned by OpenReadOnly when the database does not exist.
var ErrNoState = errors.New("no sizer state database")

// Store is the sizer's database. Safe for concurrent use.
type Store struct {
	w    *sql.DB // one connection: SQLite has one writer
	r    *sql.DB // readers
	path string

	// Group commit for agent reports: concurrent AddBatch calls share one
	// transaction (one fsync), each batch inside its own savepoint.
	group  bool
	wmu    sync.RWMutex
	closed bool
	wq     chan batchReq
	wdone  chan struct{}
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

const schema = `
CREATE TABLE IF NOT EXISTS records_seen(node TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY(node, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_gpu(job_id TEXT NOT NULL, node TEXT NOT NULL, gpu INTEGER NOT NULL, samples INTEGER NOT NULL, util_sum REAL NOT NULL, mem_peak INTEGER NOT NULL, mem_total INTEGER NOT NULL, PRIMARY KEY(job_id, node, gpu)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_node(job_id TEXT NOT NULL, node TEXT NOT NULL, peak_mem INTEGER NOT NULL DEFAULT 0, first_ts INTEGER, last_ts INTEGER, summary TEXT, PRIMARY KEY(job_id, node)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs(job_id TEXT PRIMARY KEY, job_name TEXT NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, class TEXT, gpu_model TEXT, gpus_per_node INTEGER NOT NULL, nodes INTEGER NOT NULL, gpu_mem_mib INTEGER NOT NULL, updated INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_user_name ON jobs(user, job_name);
CREATE TABLE IF NOT EXISTS instances(instance_id TEXT PRIMARY KEY, node TEXT, instance_type TEXT, zone TEXT, capacity TEXT, price REAL NOT NULL, account TEXT, job_id TEXT, launched INTEGER NOT NULL, terminated INTEGER);
CREATE INDEX IF NOT EXISTS instances_launched ON instances(launched);
CREATE TABLE IF NOT EXISTS interruptions(instance_id TEXT NOT NULL, node TEXT, instance_type TEXT, zone TEXT, action TEXT, ts INTEGER NOT NULL, PRIMARY KEY(instance_id, ts));
`

func dsn(path string, ro bool) string {
	q := "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	if ro {
		q = "?mode=ro&_pragma=busy_timeout(2000)&_pragma=query_only(1)"
	}
	return "file:" + path + q
}

// Open opens (creating if needed) the database in dir. The directory is
// created 0700 and the database files are 0600.
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
	if _, err := w.ExecContext(ctx, schema); err != nil {
		w.Close()
		return nil, fmt.Errorf("creating sizer schema in %s: %w", path, err)
	}
	for _, suf := range []string{"-wal", "-shm"} {
		if err := os.Chmod(path+suf, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.Close()
			return nil, fmt.Errorf("securing %s%s: %w", path, suf, err)
		}
	}
	r, err := sql.Open("sqlite", dsn(path, false)+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("opening sizer database %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	s := &Store{w: w, r: r, path: path, group: true}
	for _, o := range opts {
		o(s)
	}
	if s.group {
		s.wq = make(chan batchReq, MaxGroup)
		s.wdone = make(chan struct{})
		go s.writer()
	}
	return s, nil
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
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for i, rq := range reqs {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT batch"); err != nil {
				return err
			}
			r, err := addBatch(ctx, tx, rq.b)
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
	return &Store{r: r, path: path}, nil
}

// Path is the database file.
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
	if s.w != nil {
		if _, err := s.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			errs = append(errs, fmt.Errorf("checkpointing sizer database: %w", err))
		}
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

var errReadOnly = errors.New("sizer database opened read-only")

func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if s.w == nil {
		return errReadOnly
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
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

// AddBatch stores an agent's batch, committed before it returns. Records
// already stored (same node and seq) are counted as duplicates and not
// applied again. A batch with a bad record is not stored at all.
func (s *Store) AddBatch(ctx context.Context, b sizerapi.ReportBatch) (sizerapi.ReportResult, error) {
	if s.w == nil {
		return sizerapi.ReportResult{}, errReadOnly
	}
	if !s.group {
		var res sizerapi.ReportResult
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			res, err = addBatch(ctx, tx, b)
			return err
		})
		if err != nil {
			return sizerapi.ReportResult{}, fmt.Errorf("storing report batch from %s: %w", b.Node, err)
		}
		return res, nil
	}
	out := make(chan batchRes, 1)
	s.wmu.RLock()
	if s.closed {
		s.wmu.RUnlock()
		return sizerapi.ReportResult{}, ErrClosed
	}
	s.wq <- batchReq{b: b, out: out}
	s.wmu.RUnlock()
	r := <-out // the commit is not abandoned when ctx ends: the caller learns its fate
	return r.r, r.err
}

func addBatch(ctx context.Context, tx *sql.Tx, b sizerapi.ReportBatch) (sizerapi.ReportResult, error) {
	var res sizerapi.ReportResult
	err := func() error {
		for _, r := range b.Records {
			out, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO records_seen(node, seq, kind, ts) VALUES(?,?,?,?)`, b.Node, int64(r.Seq), r.Kind, ms(r.Time))
			if err != nil {
				return fmt.Errorf("recording report %s/%d: %w", b.Node, r.Seq, err)
			}
			if n, _ := out.RowsAffected(); n == 0 {
				res.Duplicates++
				continue
			}
			res.Accepted++
			if err := applyRecord(ctx, tx, b, r); err != nil {
				return fmt.Errorf("applying report %s/%d: %w", b.Node, r.Seq, err)
			}
		}
		return nil
	}()
	if err != nil {
		return sizerapi.ReportResult{}, err
	}
	return res, nil
}

func applyRecord(ctx context.Context, tx *sql.Tx, b sizerapi.ReportBatch, r sizerapi.Record) error {
	switch r.Kind {
	case sizerapi.KindGPU:
		perJob := map[uint32]uint64{}
		for _, g := range r.GPUs {
			for _, j := range g.JobIDs {
				perJob[j] += g.MemoryUsedBytes
				if _, err := tx.ExecContext(ctx, `INSERT INTO job_gpu(job_id, node, gpu, samples, util_sum, mem_peak, mem_total) VALUES(?,?,?,1,?,?,?)
ON CONFLICT(job_id, node, gpu) DO UPDATE SET samples = samples + 1, util_sum = util_sum + excluded.util_sum, mem_peak = max(mem_peak, excluded.mem_peak), mem_total = max(mem_total, excluded.mem_total)`,
					fmt.Sprint(j), b.Node, g.Index, float64(g.UtilPercent), int64(g.MemoryUsedBytes), int64(g.MemoryTotalBytes)); err != nil {
					return err
				}
			}
		}
		for j, mem := range perJob {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_node(job_id, node, peak_mem, first_ts, last_ts) VALUES(?,?,?,?,?)
ON CONFLICT(job_id, node) DO UPDATE SET peak_mem = max(peak_mem, excluded.peak_mem), first_ts = min(coalesce(first_ts, excluded.first_ts), excluded.first_ts), last_ts = max(coalesce(last_ts, excluded.last_ts), excluded.last_ts)`,
				fmt.Sprint(j), b.Node, int64(mem), ms(r.Time), ms(r.Time)); err != nil {
				return err
			}
		}
	case sizerapi.KindJobSummary:
		if r.Summary == nil {
			return errors.New("job_summary record without summary")
		}
		js, _ := json.Marshal(r.Summary)
		_, err := tx.ExecContext(ctx, `INSERT INTO job_node(job_id, node, peak_mem, first_ts, last_ts, summary) VALUES(?,?,0,?,?,?)
ON CONFLICT(job_id, node) DO UPDATE SET summary = excluded.summary, first_ts = coalesce(first_ts, excluded.first_ts), last_ts = max(coalesce(last_ts, excluded.last_ts), excluded.last_ts)`,
			fmt.Sprint(r.Summary.JobID), b.Node, ms(r.Summary.Start), ms(r.Summary.End), string(js))
		return err
	case sizerapi.KindInterruption:
		if r.Event == nil {
			return errors.New("interruption record without event")
		}
		id := r.Event.InstanceID
		if id == "" {
			id = b.InstanceID
		}
		t := r.Event.NoticeTime
		if t.IsZero() {
			t = r.Time
		}
		return addInterruption(ctx, tx, sizerapi.Interruption{InstanceID: id, Node: b.Node, Action: r.Event.Action, Time: t})
	default:
		return fmt.Errorf("unknown record kind %q (want gpu, job_summary or interruption)", r.Kind)
	}
	return nil
}

func addInterruption(ctx context.Context, tx *sql.Tx, in sizerapi.Interruption) error {
	if in.InstanceType == "" || in.Zone == "" {
		var typ, zone sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT instance_type, zone FROM instances WHERE instance_id = ?`, in.InstanceID).Scan(&typ, &zone)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if in.InstanceType == "" {
			in.InstanceType = typ.String
		}
		if in.Zone == "" {
			in.Zone = zone.String
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO interruptions(instance_id, node, instance_type, zone, action, ts) VALUES(?,?,?,?,?,?)`,
		in.InstanceID, in.Node, in.InstanceType, in.Zone, in.Action, ms(in.Time))
	return err
}

// AddInterruption records an interruption notice; the instance type and zone
// are taken from the launch record when not given.
func (s *Store) AddInterruption(ctx context.Context, in sizerapi.Interruption) error {
	if err := s.tx(ctx, func(tx *sql.Tx) error { return addInterruption(ctx, tx, in) }); err != nil {
		return fmt.Errorf("storing interruption of %s: %w", in.InstanceID, err)
	}
	return nil
}

// Interruptions returns notices at or after since, newest first.
func (s *Store) Interruptions(ctx context.Context, since time.Time) ([]sizerapi.Interruption, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT instance_id, coalesce(node,''), coalesce(instance_type,''), coalesce(zone,''), coalesce(action,''), ts FROM interruptions WHERE ts >= ? ORDER BY ts DESC`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("reading interruptions: %w", err)
	}
	defer rows.Close()
	var out []sizerapi.Interruption
	for rows.Next() {
		var in sizerapi.Interruption
		var ts sql.NullInt64
		if err := rows.Scan(&in.InstanceID, &in.Node, &in.InstanceType, &in.Zone, &in.Action, &ts); err != nil {
			return nil, fmt.Errorf("reading interruptions: %w", err)
		}
		in.Time = fromMS(ts)
		out = append(out, in)
	}
	return out, rows.Err()
}

func upsertJob(ctx context.Context, tx *sql.Tx, j sizerapi.Job, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs(job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated) VALUES(?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(job_id) DO UPDATE SET job_name=excluded.job_name, user=excluded.user, account=excluded.account, class=excluded.class, gpu_model=excluded.gpu_model,
gpus_per_node=excluded.gpus_per_node, nodes=max(nodes, excluded.nodes), gpu_mem_mib=excluded.gpu_mem_mib, updated=excluded.updated`,
		j.JobID, j.JobName, j.User, j.Account, j.Class, j.GPUModel, j.GPUsPerNode, max(j.Nodes, 1), j.GPUMemoryMiB, ms(now))
	return err
}

// UpsertJob records a job's owner and allocation.
func (s *Store) UpsertJob(ctx context.Context, j sizerapi.Job, now time.Time) error {
	if err := s.tx(ctx, func(tx *sql.Tx) error { return upsertJob(ctx, tx, j, now) }); err != nil {
		return fmt.Errorf("storing job %s: %w", j.JobID, err)
	}
	return nil
}

// RecordLaunch stores an instance launch at price USD/hour (and its job, if
// given). A repeated launch of the same instance keeps the first launch time.
func (s *Store) RecordLaunch(ctx context.Context, ev sizerapi.InstanceEvent, price float64) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		jobID := ""
		if ev.Job != nil {
			jobID = ev.Job.JobID
			if ev.Account == "" {
				ev.Account = ev.Job.Account
			}
			if err := upsertJob(ctx, tx, *ev.Job, ev.Time); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO instances(instance_id, node, instance_type, zone, capacity, price, account, job_id, launched) VALUES(?,?,?,?,?,?,?,?,?)
ON CONFLICT(instance_id) DO UPDATE SET node=excluded.node, instance_type=excluded.instance_type, zone=excluded.zone, capacity=excluded.capacity, price=excluded.price, account=excluded.account, job_id=excluded.job_id`,
			ev.InstanceID, ev.Node, ev.InstanceType, ev.Zone, ev.Capacity, price, ev.Account, jobID, ms(ev.Time))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing launch of %s: %w", ev.InstanceID, err)
	}
	return nil
}

// RecordTerminate stores an instance's termination time (the first one
// reported wins). known is false for an instance never launched.
func (s *Store) RecordTerminate(ctx context.Context, id string, at time.Time) (known bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE instances SET terminated = coalesce(terminated, ?) WHERE instance_id = ?`, ms(at), id)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		known = n > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("storing termination of %s: %w", id, err)
	}
	return known, nil
}

// Intervals returns the instances alive at some point in [from, to).
func (s *Store) Intervals(ctx context.Context, from, to time.Time) ([]budget.Interval, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT i.instance_id, coalesce(i.account,''), coalesce(j.user,''), coalesce(i.job_id,''), i.price, i.launched, i.terminated
FROM instances i LEFT JOIN jobs j ON j.job_id = i.job_id WHERE i.launched < ? AND (i.terminated IS NULL OR i.terminated >= ?)`, ms(to), ms(from))
	if err != nil {
		return nil, fmt.Errorf("reading instances: %w", err)
	}
	defer rows.Close()
	var out []budget.Interval
	for rows.Next() {
		var iv budget.Interval
		var l, t sql.NullInt64
		if err := rows.Scan(&iv.InstanceID, &iv.Account, &iv.User, &iv.JobID, &iv.PriceUSD, &l, &t); err != nil {
			return nil, fmt.Errorf("reading instances: %w", err)
		}
		iv.Start, iv.End = fromMS(l), fromMS(t)
		out = append(out, iv)
	}
	return out, rows.Err()
}

// Jobs returns usage for registered jobs updated at or after since (newest
// first); user and jobName filter when not empty; limit <= 0 means all.
func (s *Store) Jobs(ctx context.Context, since time.Time, user, jobName string, limit int) ([]report.JobUsage, error) {
	q := `SELECT job_id, job_name, user, account, coalesce(class,''), coalesce(gpu_model,''), gpus_per_node, nodes, gpu_mem_mib, updated FROM jobs WHERE updated >= ?`
	args := []any{ms(since)}
	if user != "" {
		q += " AND user = ?"
		args = append(args, user)
	}
	if jobName != "" {
		q += " AND job_name = ?"
		args = append(args, jobName)
	}
	q += " ORDER BY updated DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	var out []report.JobUsage
	for rows.Next() {
		var u report.JobUsage
		var upd sql.NullInt64
		if err := rows.Scan(&u.JobID, &u.JobName, &u.User, &u.Account, &u.Class, &u.GPUModel, &u.GPUsPerNode, &u.Nodes, &u.GPUMemoryMiB, &upd); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading jobs: %w", err)
		}
		u.LastSeen = fromMS(upd)
		out = append(out, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	for i := range out {
		if err := s.fillUsage(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillUsage derives GPUs used, peak memory and mean utilisation from the
// per-GPU aggregates, or from agent job summaries when no samples arrived.
func (s *Store) fillUsage(ctx context.Context, u *report.JobUsage) error {
	rows, err := s.r.QueryContext(ctx, `SELECT node, gpu, samples, util_sum, mem_peak, mem_total FROM job_gpu WHERE job_id = ?`, u.JobID)
	if err != nil {
		return fmt.Errorf("reading usage of job %s: %w", u.JobID, err)
	}
	used := map[string]int{}
	var utilSum float64
	var nodes = map[string]bool{}
	for rows.Next() {
		var node string
		var gpu, samples int
		var us float64
		var mp, mt int64
		if err := rows.Scan(&node, &gpu, &samples, &us, &mp, &mt); err != nil {
			rows.Close()
			return fmt.Errorf("reading usage of job %s: %w", u.JobID, err)
		}
		u.Reported = true
		nodes[node] = true
		mean := us / float64(max(samples, 1))
		utilSum += mean
		if mean >= BusyUtilPct {
			used[node]++
		}
		if u.GPUMemoryMiB == 0 {
			u.GPUMemoryMiB = int(mt >> 20)
		}
	}
	rows.Close()
	for _, n := range used {
		u.GPUsUsed = max(u.GPUsUsed, n)
	}
	var peak sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT max(peak_mem) FROM job_node WHERE job_id = ?`, u.JobID).Scan(&peak); err != nil {
		return fmt.Errorf("reading peak memory of job %s: %w", u.JobID, err)
	}
	u.PeakMemMiB = int(peak.Int64 >> 20)
	alloc := u.GPUsPerNode * max(len(nodes), 1)
	if u.Reported && alloc > 0 {
		u.MeanUtilPct = utilSum / float64(alloc)
	}
	if u.Reported {
		return nil
	}
	// No samples: fall back to the agents' end-of-job summaries.
	srows, err := s.r.QueryContext(ctx, `SELECT summary FROM job_node WHERE job_id = ? AND summary IS NOT NULL`, u.JobID)
	if err != nil {
		return fmt.Errorf("reading summaries of job %s: %w", u.JobID, err)
	}
	defer srows.Close()
	var n int
	for srows.Next() {
		var raw string
		if err := srows.Scan(&raw); err != nil {
			return fmt.Errorf("reading summaries of job %s: %w", u.JobID, err)
		}
		var js sizerapi.JobSummary
		if err := json.Unmarshal([]byte(raw), &js); err != nil {
			continue
		}
		u.Reported = true
		n++
		u.GPUsUsed = max(u.GPUsUsed, len(js.GPUs))
		// The summary has the peak of the busiest GPU: assume every used GPU peaked alike.
		u.PeakMemMiB = max(u.PeakMemMiB, int(js.PeakMemoryBytes>>20)*max(len(js.GPUs), 1))
		if u.GPUsPerNode > 0 {
			u.MeanUtilPct += js.MeanUtilPercent * float64(len(js.GPUs)) / float64(u.GPUsPerNode)
		}
		if u.GPUMemoryMiB == 0 {
			u.GPUMemoryMiB = int(js.MemoryTotalBytes >> 20)
		}
	}
	if n > 0 {
		u.MeanUtilPct /= float64(n)
	}
	return srows.Err()
}

// History summarises the last limit reported jobs of a user with a job name
// for the policy's learning.
func (s *Store) History(ctx context.Context, user, jobName string, limit int) (sizing.History, error) {
	if user == "" || jobName == "" {
		return sizing.History{}, nil
	}
	jobs, err := s.Jobs(ctx, time.Time{}, user, jobName, limit)
	if err != nil {
		return sizing.History{}, err
	}
	return HistoryOf(jobs), nil
}

// HistoryOf aggregates job usages (only those with reports count).
func HistoryOf(jobs []report.JobUsage) sizing.History {
	var h sizing.History
	var util float64
	for _, j := range jobs {
		if !j.Reported {
			continue
		}
		h.Jobs++
		h.GPUsAllocated = max(h.GPUsAllocated, j.GPUsPerNode)
		h.GPUMemoryMiBAllocated = max(h.GPUMemoryMiBAllocated, j.AllocatedMemMiB())
		h.GPUsUsed = max(h.GPUsUsed, j.GPUsUsed)
		h.PeakGPUMemoryMiB = max(h.PeakGPUMemoryMiB, j.PeakMemMiB)
		util += j.MeanUtilPct
	}
	if h.Jobs > 0 {
		h.MeanUtilPct = util / float64(h.Jobs)
	}
	return h
}

// CountRecords returns how many distinct agent records are stored.
func (s *Store) CountRecords(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM records_seen`).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting records: %w", err)
	}
	return n, nil
}
