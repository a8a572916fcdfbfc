// Package admit is burst's admission control for jobs on burst nodes: hard
// monthly budgets and queue limits (concurrent GPUs and nodes per account
// and per user), decided before an instance is launched (burst-resume) or
// a warm node is handed to a job (PrologSlurmctld), and the release of the
// jobs it held once they fit (EpilogSlurmctld and burst-sizer's loop).
//
// Its state is one small file in sizer.state_dir, admissions.json, shared
// by every hook process and the sizer (internal/statefile: flock, atomic
// rewrite). Every decision reads, decides and writes under the file's
// lock, so concurrent resumes cannot overshoot a cap together:
//
//   - admitted: a job that may run, with its reservation (the price of
//     its launch per hour times its time limit, or
//     accounting.default_time_limit) and its GPUs and nodes;
//   - held: a job burst held (scontrol hold; squeue shows JobHeldAdmin and
//     its AdminComment says why), with what it needs, so a release pass
//     can tell when it fits;
//   - released: a held job released because it now fits; it counts as
//     admitted until its resume admits it for real (or for ReleasedTTL).
//
// An entry leaves the file when Slurm no longer has its job running (after
// a grace period that covers the moment between a decision and Slurm's
// next view), or when the job ends (the epilog says so).
//
// Budgets count, for an account: the month's spend (the sizer's ledger,
// or the state database read-only plus the journal when the sizer is
// down), plus for each admitted job what is left of its reservation
// (reservation less what the job was charged so far, never below zero),
// plus the new job's reservation. When the spend cannot be known the
// budget's on_unknown decides: hold (default) or allow.
package admit

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// FileName is the admissions file in the state directory.
const FileName = "admissions.json"

// HeldPrefix starts the AdminComment of every job burst holds.
const HeldPrefix = "burst: held: "

// Entry states.
const (
	StateAdmitted = "admitted"
	StateHeld     = "held"
	StateReleased = "released"
)

// Entry is one job in the admissions file.
type Entry struct {
	// Cluster is the Slurm cluster of the job (Options.Cluster; empty for
	// a file that one cluster keeps).
	Cluster    string    `json:"cluster,omitempty"`
	JobID      uint32    `json:"job_id"`
	Account    string    `json:"account"`
	User       string    `json:"user"`
	GPUs       int       `json:"gpus"`
	Nodes      int       `json:"nodes"`
	ReserveUSD float64   `json:"reserve_usd"`
	PriceUSD   float64   `json:"price_usd_per_hour"` // all its nodes
	Hours      float64   `json:"hours"`
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
}

type doc struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Need is what a job asks for.
type Need struct {
	JobID   uint32
	Account string
	User    string
	GPUs    int // all nodes
	Nodes   int
	// PriceUSD is what the job's instances cost per hour, all nodes (the
	// most expensive offering its launch may land in).
	PriceUSD  float64
	TimeLimit time.Duration // 0: none
}

// Budget is one account's cap.
type Budget struct {
	CapUSD    float64
	OnUnknown string // hold (default) or allow
}

// Limit caps concurrent GPUs and nodes of an account, a user, or a user
// within an account (empty fields match everyone).
type Limit struct {
	Account  string
	User     string
	MaxGPUs  int
	MaxNodes int
}

func (l Limit) matches(account, user string) bool {
	return (l.Account == "" || l.Account == account) && (l.User == "" || l.User == user)
}

func (l Limit) String() string {
	switch {
	case l.Account != "" && l.User != "":
		return fmt.Sprintf("user %s in account %s", l.User, l.Account)
	case l.User != "":
		return "user " + l.User
	}
	return "account " + l.Account
}

// SpendFunc returns an account's spend this month (see sizerapi.AccountSpend).
type SpendFunc func(ctx context.Context, account string) (sizerapi.AccountSpend, error)

// Shared keeps the admissions document where several sizers and
// clusters decide against it together (the sizer's PostgreSQL): Update
// runs f on the stored document inside one transaction that excludes
// every other Update of it, wherever it runs, and stores what f returns
// when it says so.
type Shared interface {
	UpdateAdmissions(ctx context.Context, f func(old []byte) (doc []byte, write bool, err error)) error
	ReadAdmissions(ctx context.Context) ([]byte, error)
}

// Options configure a Controller.
type Options struct {
	Dir string // state directory
	// Shared, when set, holds the admissions instead of the file in Dir.
	Shared Shared
	// Cluster is this cluster's cluster.name. In a Shared document it
	// names this cluster's entries: only they are pruned against this
	// cluster's Slurm jobs; other clusters' entries count against the
	// budgets and limits they share. The admissions file (one cluster's)
	// names none. What each job was charged is read by
	// sizerapi.JobKey(cluster, job).
	Cluster string
	Budgets map[string]Budget
	Limits  []Limit
	// DefaultTimeLimit is the reservation's time for a job without a time
	// limit (default 4h).
	DefaultTimeLimit time.Duration
	Spend            SpendFunc
	// Owned says whether a node is a burst node (jobs on others never count).
	Owned func(node string) bool
	// Nodes are burst's nodes (plain names, every class's): View reads the
	// jobs holding them. None: View reads only the jobs it is given and the
	// entries'.
	Nodes []string
	// Grace: an entry whose job Slurm does not show running stays this
	// long after it was written (default 1 minute). ReleasedTTL bounds a
	// released entry whose job did not start (default 5 minutes).
	Grace       time.Duration
	ReleasedTTL time.Duration
	Now         func() time.Time
	Log         *slog.Logger
}

// Controller decides admissions.
type Controller struct {
	o    Options
	path string
}

// New returns a Controller.
func New(o Options) *Controller {
	if o.DefaultTimeLimit <= 0 {
		o.DefaultTimeLimit = 4 * time.Hour
	}
	if o.Grace <= 0 {
		o.Grace = time.Minute
	}
	if o.ReleasedTTL <= 0 {
		o.ReleasedTTL = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Owned == nil {
		o.Owned = func(string) bool { return true }
	}
	return &Controller{o: o, path: filepath.Join(o.Dir, FileName)}
}

// Configured says whether any budget or limit is configured.
func (c *Controller) Configured() bool { return len(c.o.Budgets) > 0 || len(c.o.Limits) > 0 }

// Applies says whether admission control has anything to decide for an
// account and user (a budget or a matching limit).
func (c *Controller) Applies(account, user string) bool {
	if b, ok := c.o.Budgets[account]; ok && b.CapUSD > 0 {
		return true
	}
	for _, l := range c.o.Limits {
		if l.matches(account, user) {
			return true
		}
	}
	return false
}

// Decision is the outcome of Admit.
type Decision struct {
	Admitted bool
	// Reason is the hold reason (AdminComment, HeldPrefix first) when not
	// admitted; for an admitted job over an unknown spend with on_unknown
	// allow, what was not checked.
	Reason string
	// Unknown: the account's spend could not be known.
	Unknown    bool
	ReserveUSD float64
}

// slurmYear is how Slurm stands for an unlimited time limit where it
// needs a number (YEAR_MINUTES, 365 days): a job submitted through
// cli_filter into a MaxTime=INFINITE partition shows TimeLimit=UNLIMITED
// and that figure in its JSON.
const slurmYear = 365 * 24 * time.Hour

// hours is the reservation's time for a job: its time limit, or
// DefaultTimeLimit for a job without one (none given, or unlimited).
func (c *Controller) hours(tl time.Duration) float64 {
	if tl <= 0 || tl >= slurmYear {
		tl = c.o.DefaultTimeLimit
	}
	return tl.Hours()
}

// Admit decides whether the job may run now and records it: admitted
// (with its reservation) or held (with what it needs). jobs is Slurm's
// view taken before the call: View's (the job, the jobs holding burst
// nodes, the admissions' jobs), or every job. A job already admitted is
// admitted again without a second reservation.
func (c *Controller) Admit(ctx context.Context, need Need, jobs []slurm.Job) (Decision, error) {
	if !c.Applies(need.Account, need.User) {
		return Decision{Admitted: true}, nil
	}
	hours := c.hours(need.TimeLimit)
	e := Entry{Cluster: c.mine(), JobID: need.JobID, Account: need.Account, User: need.User, GPUs: need.GPUs, Nodes: need.Nodes,
		PriceUSD: need.PriceUSD, Hours: hours, ReserveUSD: need.PriceUSD * hours}
	var d Decision
	var spends map[string]spendResult
	// the spend figure is read before the lock (it may take a process
	// start); reservations are decided under it
	if b, ok := c.o.Budgets[need.Account]; ok && b.CapUSD > 0 {
		spends = map[string]spendResult{need.Account: c.spend(ctx, need.Account)}
	}
	err := c.update(ctx, func(es, foreign []Entry, now time.Time) ([]Entry, bool) {
		es = c.prune(es, jobs, now, false)
		if i := slices.IndexFunc(es, func(x Entry) bool { return x.JobID == need.JobID && x.State == StateAdmitted }); i >= 0 {
			d = Decision{Admitted: true, ReserveUSD: es[i].ReserveUSD}
			return es, false
		}
		others := slices.DeleteFunc(slices.Clone(es), func(x Entry) bool { return x.JobID == need.JobID })
		ok, reason, unknown := c.fits(e, append(slices.Clone(others), foreign...), jobs, spends)
		e.At = now
		d = Decision{Admitted: ok, Reason: reason, Unknown: unknown, ReserveUSD: e.ReserveUSD}
		if ok {
			e.State = StateAdmitted
		} else {
			e.State, e.Reason = StateHeld, reason
		}
		return append(others, e), true
	})
	if err != nil {
		return Decision{}, err
	}
	if d.Admitted && d.Unknown {
		c.o.Log.Warn("admitting a job whose account's spend is unknown (budgets[].on_unknown: allow)", "job", need.JobID, "account", need.Account, "why", d.Reason)
	}
	return d, nil
}

// Adjust sets an admitted job's price per hour (all nodes) to what its
// launch actually costs; its reservation follows.
func (c *Controller) Adjust(jobID uint32, priceUSD float64) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.update(ctx, func(es, _ []Entry, _ time.Time) ([]Entry, bool) {
		for i := range es {
			if es[i].JobID == jobID && es[i].State == StateAdmitted && priceUSD > 0 {
				es[i].PriceUSD, es[i].ReserveUSD = priceUSD, priceUSD*es[i].Hours
				return es, true
			}
		}
		return es, false
	})
}

// Forget drops a job's entry: its launch failed, or it ended.
func (c *Controller) Forget(jobID uint32) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.update(ctx, func(es, _ []Entry, _ time.Time) ([]Entry, bool) {
		n := len(es)
		es = slices.DeleteFunc(es, func(x Entry) bool { return x.JobID == jobID && x.State != StateHeld })
		return es, len(es) != n
	})
}
