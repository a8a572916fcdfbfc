// Package report builds `burst-sizer report`: per account and user, GPUs
// and GPU memory requested versus used, spend versus budget, and concrete
// right-sizing advice. It is pure: callers pass usage, instances, caps and
// the current time.
package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/budget"
)

// JobUsage is what one job was given and what it used (per node: the
// busiest node counts).
type JobUsage struct {
	JobID        string    `json:"job_id"`
	JobName      string    `json:"job_name"`
	User         string    `json:"user"`
	Account      string    `json:"account"`
	Class        string    `json:"class,omitempty"`
	GPUModel     string    `json:"gpu_model,omitempty"`
	GPUsPerNode  int       `json:"gpus_per_node"`
	Nodes        int       `json:"nodes"`
	GPUMemoryMiB int       `json:"gpu_memory_mib"` // per GPU
	Reported     bool      `json:"reported"`       // any utilisation data arrived
	GPUsUsed     int       `json:"gpus_used"`
	PeakMemMiB   int       `json:"peak_gpu_memory_mib"` // per node
	MeanUtilPct  float64   `json:"mean_util_pct"`       // over allocated GPUs
	LastSeen     time.Time `json:"last_seen"`
}

// AllocatedMemMiB is the GPU memory per node the job was given.
func (u JobUsage) AllocatedMemMiB() int { return u.GPUsPerNode * u.GPUMemoryMiB }

// Options tune the advice.
type Options struct {
	// UsedFraction: advise when jobs used at most this share of the GPUs or
	// GPU memory they asked for (default 0.5).
	UsedFraction float64
}

type acc struct {
	sizerapi.UsageRow
	gpusReq, gpusUsed, memReq, memUsed, util float64
}

func (a *acc) add(j JobUsage, spend float64) {
	a.Jobs++
	a.SpendUSD += spend
	if !j.Reported {
		return
	}
	a.Reported++
	a.gpusReq += float64(j.GPUsPerNode)
	a.gpusUsed += float64(j.GPUsUsed)
	a.memReq += float64(j.AllocatedMemMiB()) / 1024
	a.memUsed += float64(j.PeakMemMiB) / 1024
	a.util += j.MeanUtilPct
}

func (a *acc) row() sizerapi.UsageRow {
	r := a.UsageRow
	if n := float64(r.Reported); n > 0 {
		r.GPUsRequested, r.GPUsUsed = round1(a.gpusReq/n), round1(a.gpusUsed/n)
		r.GPUMemReqGiB, r.GPUMemUsedGiB = round1(a.memReq/n), round1(a.memUsed/n)
		r.MeanUtilPct = round1(a.util / n)
	}
	r.SpendUSD = round2(r.SpendUSD)
	return r
}

// Build makes the report for the month containing now. Spend per job is the
// cost of the instances launched for it; savings are the spend of the
// oversized jobs scaled by the unused share of GPUs ((asked-used)/asked),
// projected to a whole month from the part of the month elapsed.
func Build(jobs []JobUsage, ivs []budget.Interval, caps map[string]float64, now time.Time, o Options) sizerapi.UsageReport {
	if o.UsedFraction <= 0 {
		o.UsedFraction = 0.5
	}
	from := budget.MonthStart(now)
	rep := sizerapi.UsageReport{From: from, To: now}
	jobSpend := map[string]float64{}
	for _, iv := range ivs {
		if iv.JobID != "" {
			jobSpend[iv.JobID] += iv.Cost(from, now)
		}
	}
	accounts := map[string]*acc{}
	users := map[[2]string]*acc{}
	type gkey struct{ account, user, name string }
	groups := map[gkey][]JobUsage{}
	for _, j := range jobs {
		a := accounts[j.Account]
		if a == nil {
			a = &acc{UsageRow: sizerapi.UsageRow{Account: j.Account}}
			accounts[j.Account] = a
		}
		a.add(j, jobSpend[j.JobID])
		uk := [2]string{j.Account, j.User}
		u := users[uk]
		if u == nil {
			u = &acc{UsageRow: sizerapi.UsageRow{Account: j.Account, User: j.User}}
			users[uk] = u
		}
		u.add(j, jobSpend[j.JobID])
		if j.Reported && j.JobName != "" {
			k := gkey{j.Account, j.User, j.JobName}
			groups[k] = append(groups[k], j)
		}
	}
	// Accounts with budgets and spend from instances with no registered job.
	for _, st := range budget.Statuses(caps, ivs, now) {
		a := accounts[st.Account]
		if a == nil {
			a = &acc{UsageRow: sizerapi.UsageRow{Account: st.Account}}
			accounts[st.Account] = a
		}
		a.BudgetUSD, a.Over = st.MonthlyUSD, st.Over
		a.SpendUSD = st.SpentUSD
	}
	for _, a := range accounts {
		rep.Accounts = append(rep.Accounts, a.row())
	}
	for _, u := range users {
		rep.Users = append(rep.Users, u.row())
	}
	sort.Slice(rep.Accounts, func(i, j int) bool { return rep.Accounts[i].Account < rep.Accounts[j].Account })
	sort.Slice(rep.Users, func(i, j int) bool {
		if rep.Users[i].Account != rep.Users[j].Account {
			return rep.Users[i].Account < rep.Users[j].Account
		}
		return rep.Users[i].User < rep.Users[j].User
	})

	elapsed := now.Sub(from).Hours()
	monthHours := from.AddDate(0, 1, 0).Sub(from).Hours()
	for k, js := range groups {
		var asked, used int
		var askedMem, usedMem, spend float64
		for _, j := range js {
			asked = max(asked, j.GPUsPerNode)
			used = max(used, j.GPUsUsed)
			askedMem = math.Max(askedMem, float64(j.AllocatedMemMiB())/1024)
			usedMem = math.Max(usedMem, float64(j.PeakMemMiB)/1024)
			spend += jobSpend[j.JobID]
		}
		if asked == 0 {
			continue
		}
		lowGPU := float64(used) <= o.UsedFraction*float64(asked)
		if !lowGPU {
			continue
		}
		ask := max(used, 1)
		save := spend * float64(asked-ask) / float64(asked)
		if elapsed > 0 {
			save *= monthHours / elapsed
		}
		ad := sizerapi.Advice{Account: k.account, User: k.user, JobName: k.name, Jobs: len(js), AskedGPUs: asked, UsedGPUs: used,
			AskedMemGiB: round1(askedMem), UsedMemGiB: round1(usedMem), SpendUSD: round2(spend), SaveUSDPerMonth: round2(save)}
		ad.Text = fmt.Sprintf("%s's jobs named %s asked for %d GPUs and used %d: ask for %d and save about $%.2f a month (%d jobs; peak %.0f of %.0f GiB GPU memory)",
			k.user, k.name, asked, used, ask, save, len(js), usedMem, askedMem)
		rep.Advice = append(rep.Advice, ad)
	}
	sort.Slice(rep.Advice, func(i, j int) bool {
		if rep.Advice[i].SaveUSDPerMonth != rep.Advice[j].SaveUSDPerMonth {
			return rep.Advice[i].SaveUSDPerMonth > rep.Advice[j].SaveUSDPerMonth
		}
		return rep.Advice[i].Text < rep.Advice[j].Text
	})
	return rep
}

// WriteText prints the report as plain-text tables.
func WriteText(w io.Writer, r sizerapi.UsageReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "burst GPU report %s to %s (UTC)\n\n", r.From.Format("2006-01-02"), r.To.UTC().Format("2006-01-02 15:04"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tJOBS\tGPUS ASKED\tGPUS USED\tGPU MEM ASKED GiB\tGPU MEM USED GiB\tUTIL %\tSPENT $\tBUDGET $\tSTATUS")
	for _, a := range r.Accounts {
		status, bud := "ok", "-"
		if a.BudgetUSD > 0 {
			bud = fmt.Sprintf("%.2f", a.BudgetUSD)
		}
		if a.Over {
			status = "OVER BUDGET"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\n", a.Account, a.Jobs, a.GPUsRequested, a.GPUsUsed, a.GPUMemReqGiB, a.GPUMemUsedGiB, a.MeanUtilPct, a.SpendUSD, bud, status)
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tUSER\tJOBS\tGPUS ASKED\tGPUS USED\tGPU MEM ASKED GiB\tGPU MEM USED GiB\tUTIL %\tSPENT $")
	for _, u := range r.Users {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\n", u.Account, u.User, u.Jobs, u.GPUsRequested, u.GPUsUsed, u.GPUMemReqGiB, u.GPUMemUsedGiB, u.MeanUtilPct, u.SpendUSD)
	}
	tw.Flush()
	b.WriteString("\nRight-sizing advice:\n")
	if len(r.Advice) == 0 {
		b.WriteString("  none: every job name used more than half of what it asked for\n")
	}
	for _, a := range r.Advice {
		fmt.Fprintf(&b, "  - [%s] %s\n", a.Account, a.Text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
func round2(f float64) float64 { return math.Round(f*100) / 100 }
