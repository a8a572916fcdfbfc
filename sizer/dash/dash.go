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
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
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
	Store   *store.Store
	Policy  *sizing.Policy     // classes and prices
	Budgets map[string]float64 // account -> monthly cap (USD)
	// OnUnknown and IdleOwner are budgets[].on_unknown and
	// accounting.idle_owner (who pays for boot and idle time).
	OnUnknown map[string]string
	IdleOwner string
	// StateDir holds the launch breaker's and the unavailable-offerings
	// state files (burst-resume writes them); "" shows neither.
	StateDir string
	// Slurm gives node and job states; nil shows what the sizer recorded only.
	Slurm SlurmReader
	// SlurmTTL is how long one read of Slurm's state serves (default 2 s).
	SlurmTTL time.Duration
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

	mu      sync.Mutex
	snap    *slurmSnap
	snapAt  time.Time
	loading chan struct{}
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
}

// slurmState returns Slurm's nodes and jobs, read at most once per
// SlurmTTL (concurrent callers share one read); nil without Slurm.
func (s *Source) slurmState(ctx context.Context) *slurmSnap {
	if s.o.Slurm == nil {
		return nil
	}
	for {
		s.mu.Lock()
		if s.snap != nil && s.o.Now().Sub(s.snapAt) < s.o.SlurmTTL {
			sn := s.snap
			s.mu.Unlock()
			return sn
		}
		if s.loading != nil {
			wait := s.loading
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return &slurmSnap{err: ctx.Err()}
			}
		}
		s.loading = make(chan struct{})
		s.mu.Unlock()
		sn := s.readSlurm(ctx)
		s.mu.Lock()
		s.snap, s.snapAt = sn, s.o.Now()
		close(s.loading)
		s.loading = nil
		s.mu.Unlock()
		return sn
	}
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
