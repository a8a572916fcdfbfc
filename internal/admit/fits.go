package admit

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

type spendResult struct {
	s   sizerapi.AccountSpend
	err error
}

func (c *Controller) spend(ctx context.Context, account string) spendResult {
	if c.o.Spend == nil {
		return spendResult{err: fmt.Errorf("no spend source")}
	}
	s, err := c.o.Spend(ctx, account)
	return spendResult{s, err}
}

// usage is what the entries and Slurm's running jobs hold for a limit.
func (c *Controller) usage(l Limit, es []Entry, jobs []slurm.Job) (gpus, nodes int) {
	have := map[uint32]bool{}
	for _, e := range es {
		if e.State == StateHeld || !l.matches(e.Account, e.User) {
			continue
		}
		if e.Cluster == c.mine() { // another cluster's job ids are not Slurm's here
			have[e.JobID] = true
		}
		gpus += e.GPUs
		nodes += e.Nodes
	}
	// jobs running on burst nodes that bypassed admission (started before
	// it was configured, or admitted by an entry that was lost)
	for _, j := range jobs {
		if have[j.ID] || !l.matches(j.Account, j.User) || !running(j.State) || j.HasStateFlag("CONFIGURING") {
			continue
		}
		g, n := c.jobShape(j)
		gpus += g
		nodes += n
	}
	return gpus, nodes
}

// jobShape is a Slurm job's GPUs and nodes on burst nodes.
func (c *Controller) jobShape(j slurm.Job) (gpus, nodes int) {
	ns := nodeNames(j.Nodes)
	for _, n := range ns {
		if c.o.Owned(n) {
			nodes++
		}
	}
	if nodes == 0 {
		return 0, 0
	}
	per := int(j.GPUsPerNode())
	if per == 0 && len(j.GRESPerJob) > 0 {
		return int(slurm.GPUs(j.GRESPerJob)), nodes
	}
	return per * nodes, nodes
}

func nodeNames(hl string) []string {
	if hl == "" {
		return nil
	}
	if ns, err := hostlist.Expand(hl); err == nil {
		return ns
	}
	return strings.Split(hl, ",")
}

func running(state string) bool {
	switch state {
	case "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED":
		return true
	}
	return false
}

// fits checks e against the limits and the budget, given the other
// entries. spends holds the spend of e's account when it has a budget.
func (c *Controller) fits(e Entry, others []Entry, jobs []slurm.Job, spends map[string]spendResult) (ok bool, reason string, unknown bool) {
	for _, l := range c.o.Limits {
		if !l.matches(e.Account, e.User) {
			continue
		}
		if l.MaxGPUs > 0 && e.GPUs > l.MaxGPUs || l.MaxNodes > 0 && e.Nodes > l.MaxNodes {
			return false, fmt.Sprintf("%sjob needs %d GPUs on %d nodes, more than the limit of %s (%s): it cannot run until the limit is raised (burst.yaml limits)",
				HeldPrefix, e.GPUs, e.Nodes, l, limitText(l)), false
		}
		g, n := c.usage(l, others, jobs)
		if l.MaxGPUs > 0 && g+e.GPUs > l.MaxGPUs {
			return false, fmt.Sprintf("%s%s holds %d of its %d GPUs, this job needs %d; it starts when others end", HeldPrefix, l, g, l.MaxGPUs, e.GPUs), false
		}
		if l.MaxNodes > 0 && n+e.Nodes > l.MaxNodes {
			return false, fmt.Sprintf("%s%s holds %d of its %d nodes, this job needs %d; it starts when others end", HeldPrefix, l, n, l.MaxNodes, e.Nodes), false
		}
	}
	b, capped := c.o.Budgets[e.Account]
	if !capped || b.CapUSD <= 0 {
		return true, "", false
	}
	sp := spends[e.Account]
	if sp.err != nil {
		why := fmt.Sprintf("%sthe spend of account %s cannot be known now (%v); its jobs wait until it can (budgets[].on_unknown: %s)", HeldPrefix, e.Account, trim(sp.err.Error(), 160), orHold(b.OnUnknown))
		return b.OnUnknown == "allow", why, true
	}
	committed := sp.s.SpentUSD + reserved(e.Account, others, sp.s.Jobs, c.o.Cluster)
	if committed+e.ReserveUSD > b.CapUSD+1e-9 {
		return false, fmt.Sprintf("%saccount %s has $%.2f of its $%.2f monthly budget spent or reserved; this job reserves $%.2f ($%.4f/h x %s); it starts when the budget allows",
			HeldPrefix, e.Account, committed, b.CapUSD, e.ReserveUSD, e.PriceUSD, hoursText(e.Hours)), false
	}
	return true, "", false
}

// reserved is what is left of the reservations of an account's admitted
// and released jobs, given what each was charged so far (by
// sizerapi.JobKey; home is the cluster of entries without one).
func reserved(account string, es []Entry, charged map[string]float64, home string) float64 {
	t := 0.0
	for _, x := range es {
		if x.Account != account || x.State == StateHeld {
			continue
		}
		cl := x.Cluster
		if cl == "" {
			cl = home
		}
		t += math.Max(x.ReserveUSD-charged[sizerapi.JobKey(cl, fmt.Sprint(x.JobID))], 0)
	}
	return t
}

func limitText(l Limit) string {
	var p []string
	if l.MaxGPUs > 0 {
		p = append(p, fmt.Sprintf("%d GPUs", l.MaxGPUs))
	}
	if l.MaxNodes > 0 {
		p = append(p, fmt.Sprintf("%d nodes", l.MaxNodes))
	}
	return strings.Join(p, ", ")
}

func hoursText(h float64) string {
	return (time.Duration(h * float64(time.Hour))).Round(time.Second).String()
}

func orHold(s string) string {
	if s == "" {
		return "hold"
	}
	return s
}

func trim(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}
