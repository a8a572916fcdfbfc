// Package dash is the data layer of burst-sizer's dashboard and its
// read-only JSON API: it turns the sizer's store (instances, jobs, agent
// reports, decisions, interruptions), the launch breaker and
// unavailable-offerings state files and, when it can, Slurm's node and job
// states into the views of internal/sizerapi (fleet, jobs, money,
// right-sizing).
//
// Every view is read for a Scope. An account scope filters in the
// queries themselves (WHERE account = ?), so another account's rows are
// never read, whatever the caller renders. The money figures come from one
// small part (money.go) meant to be re-pointed at the spend ledger.
package dash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/usage"
)

// Scope is whose figures a view holds.
type Scope struct {
	// Account limits every view to one Slurm account; "" is every account
	// (the admin).
	Account string
}

// All is the admin's scope.
func (s Scope) All() bool { return s.Account == "" }

// ErrForbidden is returned for a scope a principal may not read.
var ErrForbidden = errors.New("forbidden")

// ScopeFor is what p may read, narrowed to account when it is not empty:
// the admin and the read-only credential read every account (or the one
// asked for); an account
// credential reads its own account only (asking for another is
// ErrForbidden); node and route credentials read nothing.
func ScopeFor(p auth.Principal, account string) (Scope, error) {
	switch {
	case p.Admin, p.ReadOnly:
		return Scope{Account: account}, nil
	case p.Account != "":
		if account != "" && account != p.Account {
			return Scope{}, fmt.Errorf("%w: the credential of account %s may not read account %s", ErrForbidden, p.Account, account)
		}
		return Scope{Account: p.Account}, nil
	}
	return Scope{}, fmt.Errorf("%w: node and route credentials may not read the dashboard", ErrForbidden)
}

// SlurmReader is the part of slurm.Client the dashboard reads.
type SlurmReader interface {
	Nodes(ctx context.Context, names ...string) ([]slurm.Node, error)
	Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error)
}

// Options configure a Source. Store and Policy are required.
type Options struct {
	Store *store.Store
	// Spend reads the month's ledger (nil: a Reader of its own over Store,
	// pricing on demand from Policy); the server shares its budgets' one.
	Spend *spend.Reader
	// Usage keeps the month's per-job usage (nil: a Reader of its own
	// over Store).
	Usage   *usage.Reader
	Policy  *sizing.Policy     // classes and prices
	Budgets map[string]float64 // account -> monthly cap (USD)
	// OnUnknown and IdleOwner are budgets[].on_unknown and
	// accounting.idle_owner (who pays for boot and idle time).
	OnUnknown map[string]string
	IdleOwner string
	// StateDir holds the launch breaker's and the unavailable-offerings
	// state files (burst-resume writes them); "" shows neither.
	StateDir string
	// Cluster is this cluster's cluster.name (budgets' reservations).
	Cluster string
	// Slurm gives node and job states; nil shows what the sizer recorded only.
	Slurm SlurmReader
	// Peers lists the callers of another burst version (the server's
	// record); nil shows none.
	Peers func() []sizerapi.PeerVersion
	// SlurmTTL is how long one read of Slurm's state serves (default 2 s).
	SlurmTTL time.Duration
	// SlurmWait is how long a view waits for a read in flight before it
	// shows the last known state (default 800 ms); SlurmTimeout bounds a
	// read (default 20 s).
	SlurmWait    time.Duration
	SlurmTimeout time.Duration
	// Logger gets the lines that say Slurm became unreachable and answers
	// again (default slog.Default()).
	Logger *slog.Logger
	// IdleTimeout is the idle-timeout counterfactual's idle time (default
	// 10 minutes, ParallelCluster's ScaledownIdletime default).
	IdleTimeout time.Duration
	// JobsWindow is how far back the jobs view looks (default 30 days);
	// JobsLimit how many jobs it lists at most, running ones aside (default 200).
	JobsWindow time.Duration
	JobsLimit  int
	Now        func() time.Time
}

// Source reads the views. Safe for concurrent use.
type Source struct {
	o Options

	mu        sync.Mutex
	last      *slurmSnap // the last finished read, good or not
	lastAt    time.Time
	good      *slurmSnap // the last good read
	downSince time.Time  // when Slurm stopped answering; zero while it answers
	downErr   error
	loading   chan struct{} // a read in flight
	loadStart time.Time
}

// DefaultIdleTimeout is the counterfactual's idle time.
const DefaultIdleTimeout = 10 * time.Minute

// New returns a Source.
func New(o Options) (*Source, error) {
	if o.Store == nil || o.Policy == nil {
		return nil, errors.New("dashboard: a store and a sizing policy are required")
	}
	if o.SlurmTTL <= 0 {
		o.SlurmTTL = 2 * time.Second
	}
	if o.SlurmWait <= 0 {
		o.SlurmWait = 800 * time.Millisecond
	}
	if o.SlurmTimeout <= 0 {
		o.SlurmTimeout = 20 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.IdleOwner == "" {
		o.IdleOwner = billing.OwnerLaunchingJob
	}
	if o.JobsWindow <= 0 {
		o.JobsWindow = 30 * 24 * time.Hour
	}
	if o.JobsLimit <= 0 {
		o.JobsLimit = 200
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Spend == nil {
		o.Spend = spend.NewReader(o.Store, func(typ string) (float64, bool) { return o.Policy.HourlyPrice(typ, capacity.OnDemand) })
	}
	if o.Usage == nil {
		o.Usage = usage.NewReader(o.Store)
	}
	return &Source{o: o}, nil
}

// IdleTimeout is the counterfactual's idle time.
func (s *Source) IdleTimeout() time.Duration { return s.o.IdleTimeout }

type slurmSnap struct {
	nodes map[string]slurm.Node
	jobs  map[uint32]slurm.Job
	// onNode is the running job on each node.
	onNode map[string]slurm.Job
	err    error
	at     time.Time // when it was read
	// downSince is when Slurm stopped answering (err is set; the maps are
	// the last good read's).
	downSince time.Time
}

// slurmState returns Slurm's nodes and jobs, read at most once per
// SlurmTTL, in the background (one read at a time, bounded by
// SlurmTimeout), so that a view never waits on Slurm longer than SlurmWait:
// when Slurm does not answer by then, or fails, the last good state is
// returned with err saying since when Slurm is unreachable (a log line
// marks the change, and another the recovery). nil without Slurm.
func (s *Source) slurmState(ctx context.Context) *slurmSnap {
	if s.o.Slurm == nil {
		return nil
	}
	s.mu.Lock()
	if s.last != nil && s.o.Now().Sub(s.lastAt) < s.o.SlurmTTL {
		sn := s.viewLocked()
		s.mu.Unlock()
		return sn
	}
	if s.loading == nil {
		s.loading = make(chan struct{})
		s.loadStart = s.o.Now()
		go s.refresh(s.loading)
	}
	wait, started := s.loading, s.loadStart
	s.mu.Unlock()
	t := time.NewTimer(s.o.SlurmWait)
	defer t.Stop()
	timedOut := false
	select {
	case <-wait:
	case <-t.C:
		timedOut = true
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if timedOut && s.downSince.IsZero() {
		s.downSince = started
		s.downErr = fmt.Errorf("no answer from Slurm within %s", s.o.SlurmWait)
		s.o.Logger.Warn("Slurm is unreachable: the dashboard shows its last known state", "since", started, "err", s.downErr)
	}
	return s.viewLocked()
}

// refresh reads Slurm once, detached from any request.
func (s *Source) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.SlurmTimeout)
	defer cancel()
	sn := s.readSlurm(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.lastAt = sn, s.o.Now()
	switch {
	case sn.err == nil:
		if !s.downSince.IsZero() {
			s.o.Logger.Info("Slurm answers again", "down_since", s.downSince)
		}
		s.good, s.downSince, s.downErr = sn, time.Time{}, nil
	case s.downSince.IsZero():
		s.downSince, s.downErr = s.loadStart, sn.err
		s.o.Logger.Warn("Slurm is unreachable: the dashboard shows its last known state", "since", s.loadStart, "err", sn.err)
	default:
		s.downErr = sn.err
	}
	close(done)
	s.loading = nil
}

// viewLocked is what a view shows: the last good state, with err set
// while Slurm is unreachable.
func (s *Source) viewLocked() *slurmSnap {
	if s.downSince.IsZero() && s.good != nil {
		return s.good
	}
	sn := &slurmSnap{nodes: map[string]slurm.Node{}, jobs: map[uint32]slurm.Job{}, onNode: map[string]slurm.Job{}}
	if s.good != nil {
		c := *s.good
		sn = &c
	}
	since := s.downSince
	if since.IsZero() {
		since = s.loadStart
	}
	cause := s.downErr
	if cause == nil {
		cause = errors.New("no answer yet")
	}
	as := "never read"
	if s.good != nil {
		as = "as of " + s.good.at.UTC().Format(time.RFC3339)
	}
	sn.err = fmt.Errorf("cannot reach Slurm since %s (%v); its node and job states shown are %s", since.UTC().Format(time.RFC3339), cause, as)
	sn.downSince = since
	return sn
}

func (s *Source) readSlurm(ctx context.Context) *slurmSnap {
	sn := &slurmSnap{nodes: map[string]slurm.Node{}, jobs: map[uint32]slurm.Job{}, onNode: map[string]slurm.Job{}, at: s.o.Now()}
	nodes, err := s.o.Slurm.Nodes(ctx)
	if err != nil {
		sn.err = err
		return sn
	}
	for _, n := range nodes {
		sn.nodes[n.Name] = n
	}
	jobs, err := s.o.Slurm.Jobs(ctx)
	if err != nil {
		sn.err = err
		return sn
	}
	for _, j := range jobs {
		sn.jobs[j.ID] = j
		if j.Nodes == "" || (j.State != "RUNNING" && j.State != "CONFIGURING" && j.State != "COMPLETING") {
			continue
		}
		for _, n := range expandNodes(j.Nodes) {
			sn.onNode[n] = j
		}
	}
	return sn
}
