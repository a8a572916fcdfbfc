package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
)

// The spend ledger's tables (schema: migrations/), beside instances (see docs/LEDGER.md):
//
//   - instances: one row per EC2 instance: what it is, its price, the job
//     it was launched for, its launch (pending) time and its end (when it
//     began shutting down) with the end's source (ec2 > burst > missing)
//     and EC2's StateReason;
//   - instance_states: every EC2 state-change event seen (deduplicated),
//     from which the running segments EC2 bills are computed;
//   - job_runs: each job's run on each node, by Slurm's start and end;
//   - launch_intents: what burst-resume journaled before each CreateFleet.

// Price sources of an instance's hourly price.
const (
	PriceResume      = "resume"           // the offering's price burst-resume ranked with (spot: an estimate)
	PriceCatalog     = "catalog"          // the catalog's on-demand price (or spot estimate)
	PriceSpotHistory = "ec2-spot-history" // the pool's price from EC2's spot price history at billing start
	// PriceReservation: the instance runs in a capacity reservation, paid
	// whether used or not, so the instance itself is charged nothing more
	PriceReservation = "reservation"
)

// Launch is one instance record.
type Launch struct {
	Event       sizerapi.InstanceEvent
	PriceUSD    float64
	OnDemandUSD float64
	PriceSource string
	Source      string // "resume" or "backfill"
	ClientToken string
	Class       string
	User        string
}

// RecordInstance stores an instance launch, or completes one: the first
// launch time stays, a backfilled row takes burst-resume's job details when
// they arrive, and a price from EC2's spot history is never replaced by an
// estimate.
func (s *Store) RecordInstance(ctx context.Context, l Launch) error {
	ev := l.Event
	if l.Source == "" {
		l.Source = "resume"
	}
	err := s.tx(ctx, func(tx *Tx) error {
		jobID := ""
		if ev.Job != nil {
			jobID = ev.Job.JobID
			if ev.Account == "" {
				ev.Account = ev.Job.Account
			}
			if l.User == "" {
				l.User = ev.Job.User
			}
			if l.Class == "" {
				l.Class = ev.Job.Class
			}
			if err := s.upsertJob(ctx, tx, *ev.Job, ev.Time); err != nil {
				return err
			}
			if err := s.recordAttempt(ctx, tx, jobID, ev.Job.Attempt, ev.Time); err != nil {
				return err
			}
		}
		if l.User == "" {
			l.User = ev.User
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO instances(instance_id, node, instance_type, zone, capacity, price, account, job_id, launched, user, class, client_token, od_price, price_source, source, cluster, reservation_id)
VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(instance_id) DO UPDATE SET
 cluster = CASE WHEN cluster = '' THEN excluded.cluster ELSE cluster END,
 reservation_id = CASE WHEN excluded.reservation_id != '' THEN excluded.reservation_id ELSE reservation_id END,
 node = CASE WHEN excluded.source='resume' OR node='' OR node IS NULL THEN excluded.node ELSE node END,
 instance_type = coalesce(nullif(excluded.instance_type,''), instance_type),
 zone = coalesce(nullif(excluded.zone,''), zone),
 capacity = coalesce(nullif(excluded.capacity,''), capacity),
 account = CASE WHEN excluded.source='resume' OR account='' OR account IS NULL THEN excluded.account ELSE account END,
 job_id = CASE WHEN excluded.source='resume' OR job_id='' OR job_id IS NULL THEN excluded.job_id ELSE job_id END,
 user = CASE WHEN excluded.source='resume' OR user='' THEN excluded.user ELSE user END,
 class = CASE WHEN excluded.class!='' THEN excluded.class ELSE class END,
 client_token = CASE WHEN excluded.client_token!='' THEN excluded.client_token ELSE client_token END,
 od_price = CASE WHEN excluded.od_price>0 THEN excluded.od_price ELSE od_price END,
 price = CASE WHEN price_source='ec2-spot-history' OR excluded.price<=0 THEN price ELSE excluded.price END,
 price_source = CASE WHEN price_source='ec2-spot-history' OR excluded.price<=0 THEN price_source ELSE excluded.price_source END,
 launched = min(launched, excluded.launched),
 source = CASE WHEN excluded.source='resume' THEN 'resume' ELSE source END`,
			ev.InstanceID, ev.Node, ev.InstanceType, ev.Zone, ev.Capacity, l.PriceUSD, ev.Account, jobID, ms(ev.Time),
			l.User, l.Class, l.ClientToken, l.OnDemandUSD, l.PriceSource, l.Source, s.cluster, ev.Reservation)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing launch of %s: %w", ev.InstanceID, err)
	}
	return nil
}

func endRank(src string) int {
	switch src {
	case sizerapi.SourceEC2:
		return 3
	case sizerapi.SourceBurst, "":
		return 2
	case sizerapi.SourceMissing:
		return 1
	}
	return 0
}

// RecordEnd stores when an instance began shutting down. A stronger
// source replaces a weaker one (EC2's transition time over burst's clock
// over "missing"); within one source the first time stays. known is false
// for an instance the ledger does not have. Either way the instance's node
// identity, if it has one, is revoked in the same transaction: a
// credential stolen from it stops working at once, even when the ledger
// never recorded the launch (issue 25).
func (s *Store) RecordEnd(ctx context.Context, id string, at time.Time, source, reason string) (known bool, err error) {
	if source == "" {
		source = sizerapi.SourceBurst
	}
	err = s.tx(ctx, func(tx *Tx) error {
		why := "instance ended (" + source + ")"
		if _, err := tx.ExecContext(ctx, `UPDATE node_identities SET revoked = coalesce(revoked, ?), revoke_reason = coalesce(revoke_reason, ?) WHERE instance_id = ?`, ms(at), why, id); err != nil {
			return err
		}
		var cur sql.NullInt64
		var curSrc string
		err := tx.QueryRowContext(ctx, `SELECT terminated, end_source FROM instances WHERE instance_id = ?`, id).Scan(&cur, &curSrc)
		if err == sql.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		known = true
		if cur.Valid && curSrc == "" {
			curSrc = sizerapi.SourceBurst // rows from before sources were kept
		}
		if !cur.Valid || endRank(source) > endRank(curSrc) {
			_, err = tx.ExecContext(ctx, `UPDATE instances SET terminated = ?, end_source = ?, end_reason = CASE WHEN ? != '' THEN ? ELSE end_reason END WHERE instance_id = ?`,
				ms(at), source, reason, reason, id)
			return err
		}
		if reason != "" {
			_, err = tx.ExecContext(ctx, `UPDATE instances SET end_reason = ? WHERE instance_id = ?`, reason, id)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("storing the end of %s: %w", id, err)
	}
	return known, nil
}

// RecordState stores an EC2 state-change event (duplicates are ignored).
// An instance shutting down or terminated has its node identity revoked
// in the same transaction: EC2's word that it ends is enough to refuse a
// credential stolen from it (issue 25). A stopped instance may start
// again, so stopping and stopped revoke nothing.
func (s *Store) RecordState(ctx context.Context, id, state string, at time.Time) error {
	err := s.tx(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO instance_states(instance_id, state, at) VALUES(?,?,?)`, id, state, ms(at)); err != nil {
			return err
		}
		switch state {
		case "shutting-down", "terminated":
			_, err := tx.ExecContext(ctx, `UPDATE node_identities SET revoked = coalesce(revoked, ?), revoke_reason = coalesce(revoke_reason, ?) WHERE instance_id = ?`,
				ms(at), "EC2 state-change: "+state, id)
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing state %s of %s: %w", state, id, err)
	}
	return nil
}

// RecordRun stores a job's start (End zero) or end on each of its nodes.
// A start of a job closes its earlier runs still open (a requeue); an end
// closes the job's open run on the node with Slurm's start and end, or
// records the whole run when its start never arrived.
func (s *Store) RecordRun(ctx context.Context, r sizerapi.JobRun) error {
	if r.JobID == "" || len(r.Nodes) == 0 || r.Start.IsZero() {
		return fmt.Errorf("storing a job run: job id, nodes and start are required")
	}
	err := s.tx(ctx, func(tx *Tx) error {
		for _, n := range r.Nodes {
			if r.End.IsZero() {
				if _, err := tx.ExecContext(ctx, `UPDATE job_runs SET "end" = ? WHERE cluster = ? AND job_id = ? AND "end" IS NULL AND start < ?`, ms(r.Start), s.cluster, r.JobID, ms(r.Start)); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO job_runs(cluster, job_id, node, account, user, gpus, start) VALUES(?,?,?,?,?,?,?)
ON CONFLICT(cluster, job_id, node, start) DO UPDATE SET account = excluded.account, user = excluded.user, gpus = max(gpus, excluded.gpus)`,
					s.cluster, r.JobID, n, r.Account, r.User, r.GPUsPerNode, ms(r.Start)); err != nil {
					return err
				}
				continue
			}
			// the end carries Slurm's own start (reset when the nodes came
			// up): it replaces the start the prolog saw
			// (a run already at that start is left alone: SQLite's UPDATE OR IGNORE, portably)
			res, err := tx.ExecContext(ctx, `UPDATE job_runs SET start = ?, "end" = ? WHERE cluster = ? AND job_id = ? AND node = ? AND "end" IS NULL
 AND (start = ? OR NOT EXISTS (SELECT 1 FROM job_runs o WHERE o.cluster = job_runs.cluster AND o.job_id = job_runs.job_id AND o.node = job_runs.node AND o.start = ?))`,
				ms(r.Start), max(ms(r.Start), ms(r.End)), s.cluster, r.JobID, n, ms(r.Start), ms(r.Start))
			if err != nil {
				return err
			}
			if k, _ := res.RowsAffected(); k > 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_runs(cluster, job_id, node, account, user, gpus, start, "end") VALUES(?,?,?,?,?,?,?,?)
ON CONFLICT(cluster, job_id, node, start) DO UPDATE SET "end" = coalesce(job_runs."end", excluded."end")`,
				s.cluster, r.JobID, n, r.Account, r.User, r.GPUsPerNode, ms(r.Start), ms(r.End)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing the run of job %s: %w", r.JobID, err)
	}
	return nil
}

// RecordIntent stores a launch intent.
func (s *Store) RecordIntent(ctx context.Context, in sizerapi.LaunchIntent) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO launch_intents(client_token, at, body) VALUES(?,?,?)`, in.ClientToken, ms(in.Time), string(b))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing launch intent %s: %w", in.ClientToken, err)
	}
	return nil
}

// IntentFor finds the launch intent of an instance: by its client token
// (EC2 reports the fleet's), else the newest intent naming its node issued
// before it launched (within an hour).
func (s *Store) IntentFor(ctx context.Context, token, node string, launched time.Time) (sizerapi.LaunchIntent, bool, error) {
	var body string
	err := s.r.QueryRowContext(ctx, `SELECT body FROM launch_intents WHERE client_token = ? ORDER BY at DESC LIMIT 1`, token).Scan(&body)
	if err == sql.ErrNoRows && node != "" {
		rows, qerr := s.r.QueryContext(ctx, `SELECT body FROM launch_intents WHERE at <= ? AND at >= ? ORDER BY at DESC`, ms(launched.Add(time.Minute)), ms(launched.Add(-time.Hour)))
		if qerr != nil {
			return sizerapi.LaunchIntent{}, false, qerr
		}
		defer rows.Close()
		for rows.Next() {
			var b string
			var in sizerapi.LaunchIntent
			if rows.Scan(&b) == nil && json.Unmarshal([]byte(b), &in) == nil {
				for _, n := range in.Nodes {
					if n == node {
						return in, true, nil
					}
				}
			}
		}
		return sizerapi.LaunchIntent{}, false, rows.Err()
	}
	if err == sql.ErrNoRows {
		return sizerapi.LaunchIntent{}, false, nil
	}
	if err != nil {
		return sizerapi.LaunchIntent{}, false, err
	}
	var in sizerapi.LaunchIntent
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		return sizerapi.LaunchIntent{}, false, err
	}
	return in, true, nil
}

// SetPrice replaces an instance's hourly price (EC2's spot history).
func (s *Store) SetPrice(ctx context.Context, id string, price float64, source string) error {
	return s.tx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE instances SET price = ?, price_source = ? WHERE instance_id = ?`, price, source, id)
		return err
	})
}

// Row is an instance as the ledger has it.
type Row struct {
	billing.Instance
	Zone        string
	PriceSource string
	Source      string
	EndSource   string
	ClientToken string
	Cluster     string // cluster.name of the sizer that recorded the launch ("" before it was kept)
	// Reservation is the capacity reservation (ODCR or Capacity Block)
	// the instance ran in; "" for none.
	Reservation string
}

// Rows returns the instances alive at some point in [from, to) (all when
// from and to are zero), with their state events and the job runs on their
// nodes.
func (s *Store) Rows(ctx context.Context, from, to time.Time) ([]Row, error) {
	return s.rows(ctx, from, to, nil)
}

// rowsOf narrows a ledger read to some instances: those with one of the
// ids, or on one of the nodes (a change log's entries).
type rowsOf struct{ ids, nodes string } // JSON arrays

func (s *Store) rows(ctx context.Context, from, to time.Time, of *rowsOf) ([]Row, error) {
	out, err := s.instanceRows(ctx, from, to, of)
	if err != nil || len(out) == 0 {
		return out, err
	}
	// state events and job runs: only what the window's instances need, and
	// with a narrowed read only the instances read and the runs on their
	// nodes
	sq, rq := `SELECT instance_id, state, at FROM instance_states`, `SELECT job_id, node, account, user, gpus, start, "end", cluster FROM job_runs`
	var sargs, rargs []any
	var rwhere []string
	if !to.IsZero() {
		sq = `SELECT s.instance_id, s.state, s.at FROM instance_states s JOIN instances i ON i.instance_id = s.instance_id
WHERE i.launched < ? AND (i.terminated IS NULL OR i.terminated >= ?)`
		sargs = []any{ms(to), ms(from)}
		rwhere = append(rwhere, `start < ? AND ("end" IS NULL OR "end" >= ?)`)
		rargs = []any{ms(to), ms(from.Add(-time.Hour))}
	}
	if of != nil {
		ids := make([]string, len(out))
		for i, r := range out {
			ids[i] = r.ID
		}
		bi, _ := json.Marshal(ids)
		if len(sargs) == 0 {
			sq += ` s WHERE`
		} else {
			sq += ` AND`
		}
		sq += ` s.instance_id IN (SELECT value FROM json_each(?))`
		sargs = append(sargs, string(bi))
		w, a := runsDuring(out)
		rwhere = append(rwhere, w)
		rargs = append(rargs, a...)
	}
	if len(rwhere) > 0 {
		rq += ` WHERE ` + strings.Join(rwhere, ` AND `)
	}
	if err := s.attachStates(ctx, out, sq, sargs); err != nil {
		return nil, err
	}
	if err := s.attachRuns(ctx, out, rq, rargs); err != nil {
		return nil, err
	}
	return out, nil
}

// runsDuring is a condition on job_runs for the runs that can overlap the
// instances: on each one's node, from the first launch there to the last
// end (none while one is open). Each term is an index range on
// job_runs(node, start), so a page of instances on nodes with long
// histories reads the runs of their spans, not every run the nodes had.
func runsDuring(ins []Row) (string, []any) {
	type span struct {
		from, to int64
		open     bool
	}
	spans := map[string]*span{}
	for _, r := range ins {
		if r.Node == "" {
			continue
		}
		sp := spans[r.Node]
		if sp == nil {
			sp = &span{from: ms(r.Launched), to: ms(r.End)}
			spans[r.Node] = sp
		}
		sp.from = min(sp.from, ms(r.Launched))
		if r.End.IsZero() {
			sp.open = true
		} else {
			sp.to = max(sp.to, ms(r.End))
		}
	}
	if len(spans) == 0 {
		return `0 = 1`, nil
	}
	var terms []string
	var args []any
	for _, n := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[n]
		t := `(node = ? AND ("end" IS NULL OR "end" >= ?)`
		args = append(args, n, sp.from)
		if !sp.open {
			t += ` AND start < ?`
			args = append(args, sp.to)
		}
		terms = append(terms, t+`)`)
	}
	return `(` + strings.Join(terms, ` OR `) + `)`, args
}

// instanceRows reads the instances of a ledger read, in launch order.
func (s *Store) instanceRows(ctx context.Context, from, to time.Time, of *rowsOf) ([]Row, error) {
	q := `SELECT instance_id, coalesce(node,''), coalesce(instance_type,''), coalesce(zone,''), coalesce(capacity,''), price, od_price, coalesce(account,''), user, coalesce(job_id,''), class,
 launched, terminated, end_source, end_reason, price_source, source, client_token, cluster, reservation_id FROM instances`
	var args []any
	var where []string
	if !to.IsZero() {
		where = append(where, `launched < ? AND (terminated IS NULL OR terminated >= ?)`)
		args = append(args, ms(to), ms(from))
	}
	if of != nil {
		where = append(where, `(instance_id IN (SELECT value FROM json_each(?)) OR node IN (SELECT value FROM json_each(?)))`)
		args = append(args, of.ids, of.nodes)
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	var out []Row
	err := s.each(ctx, q+` ORDER BY launched, instance_id`, args, func(rows *sql.Rows) error {
		var r Row
		var l, t sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Node, &r.InstanceType, &r.Zone, &r.Capacity, &r.PriceUSD, &r.OnDemandUSD, &r.Account, &r.User, &r.JobID, &r.Class,
			&l, &t, &r.EndSource, &r.EndReason, &r.PriceSource, &r.Source, &r.ClientToken, &r.Cluster, &r.Reservation); err != nil {
			return err
		}
		r.Launched, r.End = fromMS(l), fromMS(t)
		if !r.End.IsZero() && r.EndSource == "" {
			r.EndSource = sizerapi.SourceBurst
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the ledger: %w", err)
	}
	return out, nil
}

// attachStates adds the state events the query reads to their instances.
func (s *Store) attachStates(ctx context.Context, out []Row, q string, args []any) error {
	idx := make(map[string]int, len(out))
	for i, r := range out {
		idx[r.ID] = i
	}
	err := s.each(ctx, q, args, func(rows *sql.Rows) error {
		var id, st string
		var at int64
		if err := rows.Scan(&id, &st, &at); err != nil {
			return err
		}
		if i, ok := idx[id]; ok {
			out[i].States = append(out[i].States, billing.StateEvent{State: st, At: time.UnixMilli(at).UTC()})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading instance states: %w", err)
	}
	return nil
}

// attachRuns adds the job runs the query reads to the instances of their
// cluster and node alive during them, in start order (two clusters may
// name nodes alike).
func (s *Store) attachRuns(ctx context.Context, out []Row, q string, args []any) error {
	type clusterNode struct{ cluster, node string }
	byNode := map[clusterNode][]int{}
	for i, r := range out {
		if r.Node != "" {
			k := clusterNode{r.Cluster, r.Node}
			byNode[k] = append(byNode[k], i)
		}
	}
	err := s.each(ctx, q, args, func(rows *sql.Rows) error {
		var run billing.Run
		var node, cluster string
		var st int64
		var en sql.NullInt64
		if err := rows.Scan(&run.JobID, &node, &run.Account, &run.User, &run.GPUs, &st, &en, &cluster); err != nil {
			return err
		}
		run.Start, run.End = time.UnixMilli(st).UTC(), fromMS(en)
		for _, i := range byNode[clusterNode{cluster, node}] {
			in := &out[i]
			if !in.End.IsZero() && !run.Start.Before(in.End) {
				continue
			}
			if !run.End.IsZero() && !run.End.After(in.Launched) {
				continue
			}
			in.Runs = append(in.Runs, run)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading job runs: %w", err)
	}
	for i := range out {
		sort.Slice(out[i].Runs, func(a, b int) bool { return out[i].Runs[a].Start.Before(out[i].Runs[b].Start) })
	}
	return nil
}

// Unsettled returns the instances whose end EC2 has not confirmed: still
// open, or ended (by burst's clock or as missing) after endedAfter. EC2
// keeps a terminated instance visible for about an hour; after that
// burst's time is final.
func (s *Store) Unsettled(ctx context.Context, endedAfter time.Time) ([]Row, error) {
	all, err := s.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		return nil, err
	}
	var out []Row
	for _, r := range all {
		if r.Cluster != "" && r.Cluster != s.cluster {
			continue // another cluster's: its own leader settles it against its EC2
		}
		if r.End.IsZero() || r.EndSource != sizerapi.SourceEC2 && r.End.After(endedAfter) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Known reports which of the ids the ledger has.
func (s *Store) Known(ctx context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(ids); start += 500 {
		batch := ids[start:min(start+500, len(ids))]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		rows, err := s.r.QueryContext(ctx, `SELECT instance_id FROM instances WHERE instance_id IN (?`+strings.Repeat(",?", len(batch)-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				out[id] = true
			}
		}
		rows.Close()
	}
	return out, nil
}
