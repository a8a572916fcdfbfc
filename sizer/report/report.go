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
	"github.com/burst-hpc/burst/sizer/billing"
)

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

func (a *acc) add(j sizerapi.JobUsage, spend float64) {
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
	r.SpendUSD, r.OnDemandUSD = round4(r.SpendUSD), round4(r.OnDemandUSD)
	r.SavingUSD = round4(r.OnDemandUSD - r.SpendUSD)
	return r
}

// Build makes the report for the month containing now from the jobs'
// usage, the ledger's charges for the month (billing.Instance.Charges) and
// the budgets' standing. Spend per account, user and job is the sum of
// their charges, with the on-demand equivalent of the same seconds and the
// saving; savings advice is the spend of the oversized jobs scaled by the
// unused share of GPUs ((asked-used)/asked), projected to a whole month
// from the part of the month elapsed.
func Build(jobs []sizerapi.JobUsage, charges []billing.Charge, budgets []sizerapi.BudgetStatus, now time.Time, o Options) sizerapi.UsageReport {
	if o.UsedFraction <= 0 {
		o.UsedFraction = 0.5
	}
	from := billing.MonthStart(now)
	rep := sizerapi.UsageReport{From: from, To: now}
	accounts := map[string]*acc{}
	users := map[[2]string]*acc{}
	getAcct := func(a string) *acc {
		if accounts[a] == nil {
			accounts[a] = &acc{UsageRow: sizerapi.UsageRow{Account: a}}
		}
		return accounts[a]
	}
	getUser := func(a, u string) *acc {
		k := [2]string{a, u}
		if users[k] == nil {
			users[k] = &acc{UsageRow: sizerapi.UsageRow{Account: a, User: u}}
		}
		return users[k]
	}
	jobSpend := map[string]float64{}
	perJob := map[string]*sizerapi.JobSpend{}
	jobInst := map[string]map[string]bool{}
	for _, c := range charges {
		a := getAcct(c.Account)
		a.SpendUSD += c.USD
		a.OnDemandUSD += c.OnDemandUSD
		rep.SpendUSD += c.USD
		rep.OnDemandUSD += c.OnDemandUSD
		if c.User != "" {
			u := getUser(c.Account, c.User)
			u.SpendUSD += c.USD
			u.OnDemandUSD += c.OnDemandUSD
		}
		if c.JobID == "" {
			continue
		}
		jobSpend[c.JobID] += c.USD
		chargeJob(perJob, jobInst, c)
	}
	for _, j := range jobs {
		getAcct(j.Account).add(j, 0)
		getUser(j.Account, j.User).add(j, 0)
	}
	for _, b := range budgets {
		a := getAcct(b.Account)
		a.BudgetUSD, a.Over, a.ReservedUSD, a.ForecastCapAt = b.MonthlyUSD, b.Over, round2(b.ReservedUSD), b.ForecastCapAt
	}
	for _, a := range accounts {
		rep.Accounts = append(rep.Accounts, a.row())
	}
	for _, u := range users {
		rep.Users = append(rep.Users, u.row())
	}
	rep.Jobs = jobRows(perJob, jobInst)
	rep.SpendUSD, rep.OnDemandUSD = round4(rep.SpendUSD), round4(rep.OnDemandUSD)
	rep.SavingUSD = round4(rep.OnDemandUSD - rep.SpendUSD)
	sortRows(&rep)
	rep.Advice = Advise(jobs, jobSpend, now, o)
	return rep
}

// Advise is the report's right-sizing advice: the recurring jobs (one
// account's user's jobs of one name, with agent reports) that used at most
// o.UsedFraction of the GPUs they asked for, with the month's spend of
// their jobs (jobSpend, by job id) projected to the whole month from now.
func Advise(jobs []sizerapi.JobUsage, jobSpend map[string]float64, now time.Time, o Options) []sizerapi.Advice {
	if o.UsedFraction <= 0 {
		o.UsedFraction = 0.5
	}
	groups := map[gkey]*group{}
	for i := range jobs {
		j := &jobs[i] // not copied: a month holds 100,000 jobs
		if !j.Reported || j.JobName == "" {
			continue
		}
		k := gkey{j.Account, j.User, j.JobName}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		g.add(j, jobSpend[j.JobID])
	}
	return advice(groups, billing.MonthStart(now), now, o)
}

// group is what advice needs of a group's jobs: their count, the most
// they asked for and used, and their spend.
type group struct {
	jobs, asked, used           int
	askedMem, usedMem, spendUSD float64
}

func (g *group) add(j *sizerapi.JobUsage, usd float64) {
	g.jobs++
	g.asked = max(g.asked, j.GPUsPerNode)
	g.used = max(g.used, j.GPUsUsed)
	g.askedMem = math.Max(g.askedMem, float64(j.AllocatedMemMiB())/1024)
	g.usedMem = math.Max(g.usedMem, float64(j.PeakMemMiB)/1024)
	g.spendUSD += usd
}

// gkey names a group of jobs: an account's user's jobs of one name.
type gkey struct{ account, user, name string }

// chargeJob adds a charge to its job's spend and instances.
func chargeJob(perJob map[string]*sizerapi.JobSpend, jobInst map[string]map[string]bool, c billing.Charge) {
	j := perJob[c.JobID]
	if j == nil {
		j = &sizerapi.JobSpend{JobID: c.JobID, Account: c.Account, User: c.User}
		perJob[c.JobID] = j
		jobInst[c.JobID] = map[string]bool{}
	}
	if !c.Idle {
		j.Account, j.User = c.Account, c.User
		j.RunSeconds += c.Seconds
	} else {
		j.IdleSeconds += c.Seconds
	}
	j.SpendUSD += c.USD
	j.OnDemandUSD += c.OnDemandUSD
	jobInst[c.JobID][c.InstanceID] = true
}

// jobRows are the jobs' spend rows, rounded.
func jobRows(perJob map[string]*sizerapi.JobSpend, jobInst map[string]map[string]bool) []sizerapi.JobSpend {
	var out []sizerapi.JobSpend
	for id, j := range perJob {
		j.Instances = len(jobInst[id])
		j.SpendUSD, j.OnDemandUSD = round4(j.SpendUSD), round4(j.OnDemandUSD)
		j.SavingUSD = round4(j.OnDemandUSD - j.SpendUSD)
		j.RunSeconds, j.IdleSeconds = round1(j.RunSeconds), round1(j.IdleSeconds)
		out = append(out, *j)
	}
	return out
}

// sortRows orders accounts and users by name, jobs by spend.
func sortRows(rep *sizerapi.UsageReport) {
	sort.Slice(rep.Accounts, func(i, j int) bool { return rep.Accounts[i].Account < rep.Accounts[j].Account })
	sort.Slice(rep.Users, func(i, j int) bool {
		if rep.Users[i].Account != rep.Users[j].Account {
			return rep.Users[i].Account < rep.Users[j].Account
		}
		return rep.Users[i].User < rep.Users[j].User
	})
	sort.Slice(rep.Jobs, func(i, j int) bool {
		if rep.Jobs[i].SpendUSD != rep.Jobs[j].SpendUSD {
			return rep.Jobs[i].SpendUSD > rep.Jobs[j].SpendUSD
		}
		return rep.Jobs[i].JobID < rep.Jobs[j].JobID
	})
}

// advice is the right-sizing advice for the groups of jobs that used at
// most o.UsedFraction of the GPUs they asked for, the largest saving first.
func advice(groups map[gkey]*group, from, now time.Time, o Options) []sizerapi.Advice {
	var out []sizerapi.Advice
	elapsed := now.Sub(from).Hours()
	monthHours := from.AddDate(0, 1, 0).Sub(from).Hours()
	for k, g := range groups {
		asked, used, askedMem, usedMem, spend := g.asked, g.used, g.askedMem, g.usedMem, g.spendUSD
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
		ad := sizerapi.Advice{Account: k.account, User: k.user, JobName: k.name, Jobs: g.jobs, AskedGPUs: asked, UsedGPUs: used,
			AskedMemGiB: round1(askedMem), UsedMemGiB: round1(usedMem), SpendUSD: round2(spend), SaveUSDPerMonth: round2(save)}
		ad.Text = fmt.Sprintf("%s's jobs named %s asked for %d GPUs and used %d: ask for %d and save about $%.2f a month (%d jobs; peak %.0f of %.0f GiB GPU memory)",
			k.user, k.name, asked, used, ask, save, g.jobs, usedMem, askedMem)
		out = append(out, ad)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SaveUSDPerMonth != out[j].SaveUSDPerMonth {
			return out[i].SaveUSDPerMonth > out[j].SaveUSDPerMonth
		}
		return out[i].Text < out[j].Text
	})
	return out
}

// WriteText prints the report as plain-text tables.
func WriteText(w io.Writer, r sizerapi.UsageReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "burst GPU report %s to %s (UTC)\n\n", r.From.Format("2006-01-02"), r.To.UTC().Format("2006-01-02 15:04"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tJOBS\tGPUS ASKED\tGPUS USED\tGPU MEM ASKED GiB\tGPU MEM USED GiB\tUTIL %\tSPENT $\tON-DEMAND $\tSAVED $\tRESERVED $\tBUDGET $\tSTATUS")
	for _, a := range r.Accounts {
		status, bud, res := "ok", "-", "-"
		if a.BudgetUSD > 0 {
			bud = fmt.Sprintf("%.2f", a.BudgetUSD)
			res = fmt.Sprintf("%.2f", a.ReservedUSD)
			if a.ForecastCapAt != nil {
				status = "cap at " + a.ForecastCapAt.UTC().Format("01-02 15:04") + " UTC"
			}
		}
		if a.Over {
			status = "OVER BUDGET"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\n", a.Account, a.Jobs, a.GPUsRequested, a.GPUsUsed, a.GPUMemReqGiB, a.GPUMemUsedGiB, a.MeanUtilPct,
			a.SpendUSD, a.OnDemandUSD, a.SavingUSD, res, bud, status)
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tUSER\tJOBS\tGPUS ASKED\tGPUS USED\tGPU MEM ASKED GiB\tGPU MEM USED GiB\tUTIL %\tSPENT $\tON-DEMAND $\tSAVED $")
	for _, u := range r.Users {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.4f\t%.4f\t%.4f\n", u.Account, u.User, u.Jobs, u.GPUsRequested, u.GPUsUsed, u.GPUMemReqGiB, u.GPUMemUsedGiB, u.MeanUtilPct,
			u.SpendUSD, u.OnDemandUSD, u.SavingUSD)
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tACCOUNT\tUSER\tINSTANCES\tRUN s\tIDLE+BOOT s\tSPENT $\tON-DEMAND $\tSAVED $")
	for _, j := range r.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.0f\t%.4f\t%.4f\t%.4f\n", j.JobID, j.Account, j.User, j.Instances, j.RunSeconds, j.IdleSeconds, j.SpendUSD, j.OnDemandUSD, j.SavingUSD)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nTotal: spent $%.4f; the same seconds on-demand $%.4f; saved $%.4f\n", r.SpendUSD, r.OnDemandUSD, r.SavingUSD)
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
func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }
