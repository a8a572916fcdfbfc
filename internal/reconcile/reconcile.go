package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Cloud is the part of cloud.Provider the reconciler uses.
type Cloud interface {
	List(ctx context.Context) ([]cloud.Instance, error)
	TerminateIDs(ctx context.Context, ids []string) ([]string, error)
}

// Slurm is the part of slurm.Client the reconciler uses.
type Slurm interface {
	Nodes(ctx context.Context, names ...string) ([]slurm.Node, error)
	JobStates(ctx context.Context, f slurm.JobFilter) ([]slurm.JobState, error)
	UpdateNodes(ctx context.Context, updates ...slurm.NodeUpdate) error
	Requeue(ctx context.Context, jobID uint32) error
	StartNow(ctx context.Context, jobID uint32) error
	// Hold and Release record the requeue's reason as the job's
	// AdminComment (Hold's reason) without keeping it held.
	Hold(ctx context.Context, jobID uint32, reason string) error
	Release(ctx context.Context, jobID uint32) error
}

// Options configure a Reconciler. Zero values take the defaults noted.
type Options struct {
	// Grace before a live instance without a node counts as an orphan, or a
	// second instance of a node as a duplicate (default 2 minutes).
	Grace time.Duration
	// ResumeTimeout is Slurm's ResumeTimeout (default 10 minutes).
	ResumeTimeout time.Duration
	// Owned says whether a Slurm node is burst's (default: CLOUD nodes).
	Owned func(node string) bool
	// DryRun plans and reports but changes nothing.
	DryRun bool
	// Terminated is told about every instance the reconciler terminated
	// (spend accounting): only those EC2 accepted; may be nil. Its errors
	// are logged.
	Terminated func(ctx context.Context, instanceID string, at time.Time) error
	// Fence, when set, is asked before a pass acts (sizer/store's Fence:
	// whether this sizer still leads); an error skips the pass's actions.
	Fence func(ctx context.Context) error
	// RequeueWait bounds the wait for requeued jobs to be pending again
	// (default 20 s); PollInterval is how often it looks (default 250 ms).
	RequeueWait  time.Duration
	PollInterval time.Duration
	Now          func() time.Time // default time.Now
	Logger       *slog.Logger     // default discards
	// Registerer gets the metrics; nil: not registered.
	Registerer prometheus.Registerer
}

// Reconciler runs reconciliation passes. It is safe for concurrent use;
// passes are serialized.
type Reconciler struct {
	cloud Cloud
	slurm Slurm
	o     Options
	log   *slog.Logger

	mu   sync.Mutex
	mem  *Memory
	kick chan struct{} // Kick: a pass now (kick.go)

	actions *prometheus.CounterVec
	runs    *prometheus.CounterVec
	last    prometheus.Gauge
	seen    *prometheus.GaugeVec
	errs    *prometheus.CounterVec
}

// Result is what happened to one action.
type Result struct {
	Action
	Jobs []uint32 // HandBack: jobs on the node that were requeued (or would be, in a dry run)
	Err  error    // nil when done (or skipped in a dry run)
}

// Report is one pass.
type Report struct {
	At        time.Time
	DryRun    bool
	Instances int // instances listed (not terminated)
	Nodes     int // burst nodes Slurm reported
	Results   []Result
}

// New returns a Reconciler. Metrics are registered on o.Registerer (an
// error when they already are).
func New(c Cloud, s Slurm, o Options) (*Reconciler, error) {
	if c == nil || s == nil {
		return nil, errors.New("creating reconciler: a cloud provider and a Slurm client are required")
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Minute
	}
	if o.ResumeTimeout <= 0 {
		o.ResumeTimeout = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RequeueWait <= 0 {
		o.RequeueWait = 20 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reconciler{cloud: c, slurm: s, o: o, log: o.Logger, mem: NewMemory(), kick: make(chan struct{}, 1)}
	r.actions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_reconcile_actions_total",
		Help: "Reconciler actions taken (terminate, hand-back) by reason; failed ones are counted in burst_reconcile_action_errors_total too."}, []string{"action", "reason"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_reconcile_action_errors_total",
		Help: "Reconciler actions that failed, by action and reason."}, []string{"action", "reason"})
	r.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_reconcile_runs_total",
		Help: "Reconciliation passes by result (ok, error)."}, []string{"result"})
	r.last = prometheus.NewGauge(prometheus.GaugeOpts{Name: "burst_reconcile_last_success_timestamp_seconds",
		Help: "Unix time of the last pass that read both the cloud and Slurm."})
	r.seen = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "burst_reconcile_instances",
		Help: "Cluster instances seen by the last pass, by state."}, []string{"state"})
	r.errs = errs
	if reg := o.Registerer; reg != nil {
		if err := errors.Join(reg.Register(r.actions), reg.Register(errs), reg.Register(r.runs), reg.Register(r.last), reg.Register(r.seen)); err != nil {
			return nil, fmt.Errorf("creating reconciler: registering metrics: %w", err)
		}
	}
	return r, nil
}

// RunOnce runs one pass: Slurm's nodes first, then the instances (so a node
// that registers in between is never taken for one whose instance is
// gone), then Plan, then the actions. It returns an error when either side
// could not be read (nothing is done then) or when an action failed; the
// report lists every action with its outcome.
func (r *Reconciler) RunOnce(ctx context.Context) (Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Now()
	rep := Report{At: now, DryRun: r.o.DryRun}
	nodes, err := r.slurm.Nodes(ctx)
	if err != nil {
		r.runs.WithLabelValues("error").Inc()
		return rep, fmt.Errorf("reconciling: reading Slurm's nodes: %w", err)
	}
	insts, err := r.cloud.List(ctx)
	if err != nil {
		r.runs.WithLabelValues("error").Inc()
		return rep, fmt.Errorf("reconciling: listing the cluster's instances: %w", err)
	}
	opts := PlanOptions{Grace: r.o.Grace, ResumeTimeout: r.o.ResumeTimeout, Owned: r.o.Owned, Memory: r.mem}
	for _, n := range nodes {
		if (r.o.Owned != nil && r.o.Owned(n.Name)) || (r.o.Owned == nil && n.HasFlag("CLOUD")) {
			rep.Nodes++
		}
	}
	rep.Instances = len(insts)
	states := map[string]float64{"pending": 0, "running": 0, "shutting-down": 0, "stopping": 0, "stopped": 0}
	for _, in := range insts {
		states[in.State]++
	}
	for s, v := range states {
		r.seen.WithLabelValues(s).Set(v)
	}
	acts := Plan(insts, nodes, now, opts)
	r.mem.Observe(insts, nodes, now)
	if len(acts) > 0 && !r.o.DryRun && r.o.Fence != nil {
		if err := r.o.Fence(ctx); err != nil {
			r.runs.WithLabelValues("error").Inc()
			return rep, fmt.Errorf("reconciling: not acting on %d planned actions: %w", len(acts), err)
		}
	}
	var errs []error
	for _, a := range acts {
		res := r.execute(ctx, a, now)
		rep.Results = append(rep.Results, res)
		if res.Err != nil {
			errs = append(errs, res.Err)
		}
	}
	r.runs.WithLabelValues("ok").Inc()
	r.last.Set(float64(now.Unix()))
	if len(acts) > 0 || len(errs) > 0 {
		r.log.Info("reconciled", "instances", rep.Instances, "nodes", rep.Nodes, "actions", len(acts), "failed", len(errs), "dry_run", r.o.DryRun)
	} else {
		r.log.Debug("reconciled: cloud and Slurm agree", "instances", rep.Instances, "nodes", rep.Nodes)
	}
	return rep, errors.Join(errs...)
}

func (r *Reconciler) execute(ctx context.Context, a Action, now time.Time) Result {
	res := Result{Action: a}
	log := r.log.With("action", string(a.Kind), "reason", string(a.Reason), "node", a.Node, "instances", a.InstanceIDs, "detail", a.Detail, "dry_run", r.o.DryRun)
	switch a.Kind {
	case Terminate:
		if !r.o.DryRun {
			var done []string
			done, res.Err = r.cloud.TerminateIDs(ctx, a.InstanceIDs)
			if r.o.Terminated != nil {
				// only what EC2 accepted: the ledger closes the rest when
				// EC2 reports them terminated
				for _, id := range done {
					if err := r.o.Terminated(ctx, id, now); err != nil {
						log.Warn("recording the termination", "instance_id", id, "err", err)
					}
				}
			}
			if res.Err != nil {
				res.Err = fmt.Errorf("terminating %v (%s): %w", a.InstanceIDs, a.Reason, res.Err)
			}
		}
	case HandBack:
		res.Jobs, res.Err = r.handBack(ctx, a, log)
		if res.Err == nil && !r.o.DryRun && a.Reason == ReasonInstanceGone && len(a.InstanceIDs) > 0 {
			r.mem.HandedBack[a.Node] = a.InstanceIDs[0]
		}
	}
	if res.Err != nil {
		log.Error("reconcile action failed", "jobs", res.Jobs, "err", res.Err)
		r.errs.WithLabelValues(string(a.Kind), string(a.Reason)).Inc()
	} else {
		log.Warn("reconcile action", "jobs", res.Jobs)
	}
	if !r.o.DryRun {
		r.actions.WithLabelValues(string(a.Kind), string(a.Reason)).Inc()
	}
	return res
}

// handBack requeues the node's running jobs (and makes them eligible at
// once) and then powers the node down with the reason, so Slurm runs
// SuspendProgram and the jobs get new nodes.
func (r *Reconciler) handBack(ctx context.Context, a Action, log *slog.Logger) ([]uint32, error) {
	jobs, err := r.slurm.JobStates(ctx, slurm.JobFilter{Nodes: []string{a.Node},
		States: []string{"RUNNING", "CONFIGURING", "SUSPENDED", "COMPLETING"}})
	if err != nil {
		return nil, fmt.Errorf("handing back %s: listing its jobs: %w", a.Node, err)
	}
	var ids []uint32
	for _, j := range jobs {
		ns, err := hostlist.Expand(j.Nodes)
		if err != nil || !slices.Contains(ns, a.Node) {
			continue
		}
		ids = append(ids, j.ID)
	}
	if r.o.DryRun {
		return ids, nil
	}
	var errs []error
	now := r.o.Now().UTC().Format("2006-01-02T15:04:05Z")
	var requeued []uint32
	for _, id := range ids {
		if err := r.slurm.Requeue(ctx, id); err != nil {
			if errors.Is(err, slurm.ErrJobPending) {
				// Slurm requeued it itself a moment before (the node
				// failed): nothing to do, and no AdminComment to wait for
				log.Info("job already requeued by Slurm", "job", id, "node", a.Node)
				continue
			}
			// a job that cannot be requeued (--no-requeue) ends NODE_FAIL
			// when the node goes down; say so
			errs = append(errs, fmt.Errorf("requeueing job %d of %s: %w", id, a.Node, err))
			continue
		}
		requeued = append(requeued, id)
		log.Warn("requeued job", "job", id, "node", a.Node, "why", a.Detail)
	}
	reason := a.Detail
	if len(reason) > 120 {
		reason = reason[:117] + "..."
	}
	// the epilog of a requeued job may overwrite the node's reason: the
	// node's Comment keeps it
	comment := "burst " + now + ": " + strings.TrimPrefix(a.Detail, "burst: ")
	if len(requeued) > 0 {
		comment += fmt.Sprintf("; requeued jobs %v", requeued)
	}
	if err := r.slurm.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{a.Node}, State: "POWER_DOWN_FORCE", Reason: reason, Comment: comment}); err != nil {
		errs = append(errs, fmt.Errorf("handing back %s: %w", a.Node, err))
	}
	// Slurm finishes a requeue (and sets its ~120 s BeginTime) only once
	// the job left the dead node; then burst says why on the job and
	// makes it eligible at once
	note := "burst " + now + ": requeued from " + a.Node + ": " + strings.TrimPrefix(a.Detail, "burst: ")
	for _, id := range r.waitPending(ctx, requeued) {
		// the job's AdminComment says why it was requeued (Slurm has no
		// other per-job text the admin sees in squeue and sacct)
		if err := r.slurm.Hold(ctx, id, note); err != nil {
			log.Warn("recording the requeue reason on the job", "job", id, "err", err)
		} else if err := r.slurm.Release(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("releasing job %d after recording its requeue reason (run scontrol release %d): %w", id, id, err))
		}
		if err := r.slurm.StartNow(ctx, id); err != nil {
			log.Warn("making requeued job eligible now; Slurm's BeginTime delay applies", "job", id, "err", err)
		}
	}
	return ids, errors.Join(errs...)
}

// waitPending waits (up to RequeueWait) until the jobs are pending again
// and returns those that are; the others are logged.
func (r *Reconciler) waitPending(ctx context.Context, ids []uint32) []uint32 {
	if len(ids) == 0 {
		return nil
	}
	deadline := time.Now().Add(r.o.RequeueWait)
	for {
		jobs, err := r.slurm.JobStates(ctx, slurm.JobFilter{IDs: ids})
		var pending, other []uint32
		if err == nil {
			for _, j := range jobs {
				if j.State == "PENDING" {
					pending = append(pending, j.ID)
				} else {
					other = append(other, j.ID)
				}
			}
			if len(other) == 0 {
				return pending
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.log.Warn("requeued jobs not pending yet; Slurm's requeue delay applies to them", "jobs", other, "err", err)
			return pending
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.o.PollInterval):
		}
	}
}

// Run runs a pass every interval, and at once after Kick, until ctx ends;
// errors are logged, never fatal.
func (r *Reconciler) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(interval, time.Minute))
		if _, err := r.RunOnce(pctx); err != nil && ctx.Err() == nil {
			r.log.Error("reconcile pass", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}
