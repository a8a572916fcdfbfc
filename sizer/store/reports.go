package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// AddBatch stores an agent's batch, committed before it returns. Records
// already stored (same instance, node and seq: b.InstanceID is the
// identity the server attaches) are counted as duplicates and not applied
// again. GPU records of a batch whose GPUSource is not NVML are recorded
// as seen but not applied to usage (ReportResult.Ignored), unless the
// store accepts simulated GPUs. A batch with a bad record is not stored at
// all.
func (s *Store) AddBatch(ctx context.Context, b sizerapi.ReportBatch) (sizerapi.ReportResult, error) {
	if s.w == nil {
		return sizerapi.ReportResult{}, ErrReadOnly
	}
	if !s.group {
		var res sizerapi.ReportResult
		err := s.tx(ctx, func(tx *Tx) error {
			var err error
			res, err = s.addBatch(ctx, tx, b)
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

func (s *Store) addBatch(ctx context.Context, tx *Tx, b sizerapi.ReportBatch) (sizerapi.ReportResult, error) {
	var res sizerapi.ReportResult
	real := b.GPUSource == sizerapi.GPUSourceNVML || s.acceptSim && b.GPUSource == sizerapi.GPUSourceSim
	err := func() error {
		for _, r := range b.Records {
			out, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO reports_seen(instance, node, seq, kind, ts) VALUES(?,?,?,?,?)`, b.InstanceID, b.Node, int64(r.Seq), r.Kind, ms(r.Time))
			if err != nil {
				return fmt.Errorf("recording report %s/%d: %w", b.Node, r.Seq, err)
			}
			if n, _ := out.RowsAffected(); n == 0 {
				res.Duplicates++
				continue
			}
			res.Accepted++
			if (r.Kind == sizerapi.KindGPU || r.Kind == sizerapi.KindJobSummary) && !real {
				res.Ignored++
				continue
			}
			if err := s.applyRecord(ctx, tx, b, r); err != nil {
				return fmt.Errorf("applying report %s/%d: %w", b.Node, r.Seq, err)
			}
		}
		if len(b.Records) > 0 {
			return markSeen(ctx, tx, b.Node, b.InstanceID, time.Now())
		}
		return nil
	}()
	if err != nil {
		return sizerapi.ReportResult{}, err
	}
	return res, nil
}

func (s *Store) applyRecord(ctx context.Context, tx *Tx, b sizerapi.ReportBatch, r sizerapi.Record) error {
	switch r.Kind {
	case sizerapi.KindGPU:
		perJob := map[uint32]uint64{}
		for _, g := range r.GPUs {
			for _, j := range g.JobIDs {
				perJob[j] += g.MemoryUsedBytes
				if _, err := tx.ExecContext(ctx, `INSERT INTO job_gpu(cluster, job_id, node, gpu, samples, util_sum, mem_peak, mem_total) VALUES(?,?,?,?,1,?,?,?)
ON CONFLICT(cluster, job_id, node, gpu) DO UPDATE SET samples = samples + 1, util_sum = util_sum + excluded.util_sum, mem_peak = max(mem_peak, excluded.mem_peak), mem_total = max(mem_total, excluded.mem_total)`,
					s.cluster, fmt.Sprint(j), b.Node, g.Index, float64(g.UtilPercent), int64(g.MemoryUsedBytes), int64(g.MemoryTotalBytes)); err != nil {
					return err
				}
			}
		}
		for j, mem := range perJob {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_node(cluster, job_id, node, peak_mem, first_ts, last_ts) VALUES(?,?,?,?,?,?)
ON CONFLICT(cluster, job_id, node) DO UPDATE SET peak_mem = max(peak_mem, excluded.peak_mem), first_ts = min(coalesce(first_ts, excluded.first_ts), excluded.first_ts), last_ts = max(coalesce(last_ts, excluded.last_ts), excluded.last_ts)`,
				s.cluster, fmt.Sprint(j), b.Node, int64(mem), ms(r.Time), ms(r.Time)); err != nil {
				return err
			}
		}
	case sizerapi.KindJobSummary:
		if r.Summary == nil {
			return errors.New("job_summary record without summary")
		}
		js, _ := json.Marshal(r.Summary)
		_, err := tx.ExecContext(ctx, `INSERT INTO job_node(cluster, job_id, node, peak_mem, first_ts, last_ts, summary) VALUES(?,?,?,0,?,?,?)
ON CONFLICT(cluster, job_id, node) DO UPDATE SET summary = excluded.summary, first_ts = coalesce(first_ts, excluded.first_ts), last_ts = max(coalesce(last_ts, excluded.last_ts), excluded.last_ts)`,
			s.cluster, fmt.Sprint(r.Summary.JobID), b.Node, ms(r.Summary.Start), ms(r.Summary.End), string(js))
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
		// one notice per instance: EC2 sends an instance one; a later
		// record (another batch, a forged time) adds its jobs' events to
		// the first notice rather than a second notice
		var first sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT min(ts) FROM interruptions WHERE instance_id = ?`, id).Scan(&first); err != nil {
			return err
		}
		if first.Valid {
			return s.addInterruptionJobs(ctx, tx, id, fromMS(first), r.Event.Jobs)
		}
		if err := addInterruption(ctx, tx, sizerapi.Interruption{InstanceID: id, Node: b.Node, Action: r.Event.Action, Time: t}); err != nil {
			return err
		}
		return s.addInterruptionJobs(ctx, tx, id, t, r.Event.Jobs)
	case sizerapi.KindGPUHealth:
		return addGPUHealth(ctx, tx, b, r)
	default:
		return fmt.Errorf("unknown record kind %q (want gpu, job_summary or interruption)", r.Kind)
	}
	return nil
}

func addInterruption(ctx context.Context, tx *Tx, in sizerapi.Interruption) error {
	if in.InstanceType == "" || in.Zone == "" {
		var typ, zone sql.NullString
		// burst-resume's launch record, else what the identity exchange learnt from EC2
		err := tx.QueryRowContext(ctx, `SELECT instance_type, zone FROM instances WHERE instance_id = ?1
UNION ALL SELECT instance_type, zone FROM node_identities WHERE instance_id = ?1 LIMIT 1`, in.InstanceID).Scan(&typ, &zone)
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
	if err := s.tx(ctx, func(tx *Tx) error { return addInterruption(ctx, tx, in) }); err != nil {
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

// CountRecords returns how many distinct agent records are stored.
func (s *Store) CountRecords(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM reports_seen`).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting records: %w", err)
	}
	return n, nil
}
