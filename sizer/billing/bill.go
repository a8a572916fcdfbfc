package billing

import (
	"math"
	"sort"
	"time"
)

// MinBilledSeconds is EC2's minimum charge per running segment of a Linux
// instance.
const MinBilledSeconds = 60

// SpotWaiverCode is the StateReason of a spot instance EC2 reclaimed: one
// reclaimed within the first hour of running is not charged.
const SpotWaiverCode = "Server.SpotInstanceTermination"

// StateEvent is one state an instance entered, as EC2's state-change
// events report it ("pending", "running", "stopping", "stopped",
// "shutting-down", "terminated").
type StateEvent struct {
	State string
	At    time.Time
}

// Run is a job on a node as Slurm ran it (End zero while it runs).
type Run struct {
	JobID   string
	Account string
	User    string
	GPUs    int // on this node; 0 counts as 1
	Start   time.Time
	End     time.Time
}

// Instance is what the ledger knows of one instance.
type Instance struct {
	ID           string
	Node         string
	InstanceType string
	Capacity     string // spot or on-demand
	Class        string
	PriceUSD     float64 // per hour
	OnDemandUSD  float64 // per hour, for the on-demand equivalent
	// Account, User and JobID are the job the instance was launched for.
	Account string
	User    string
	JobID   string
	// Launched is when it entered pending (EC2's LaunchTime).
	Launched time.Time
	// States are the EC2 state-change events seen for it, any order,
	// duplicates allowed. With none, billing is estimated from Launched.
	States []StateEvent
	// End is when it began shutting down (or stopping, for good), by the
	// strongest source; zero while it runs.
	End       time.Time
	EndReason string // EC2's StateReason code
	Runs      []Run  // jobs that ran on its node
}

// Segment is one running stretch, as EC2 bills it.
type Segment struct {
	Start, End time.Time // End zero: still running
	FromEvents bool      // Start is EC2's running event (else the launch time, an overestimate)
}

// Segments returns the instance's running segments: from its state events
// when there are any (running opens one, stopping/shutting-down/stopped/
// terminated closes it; an instance with events but none running never
// ran and is not billed), else one segment from the launch to the end.
// The open segment of an ended instance ends at End.
func (in Instance) Segments() []Segment {
	if len(in.States) == 0 {
		if in.Launched.IsZero() {
			return nil
		}
		return []Segment{{Start: in.Launched, End: in.End}}
	}
	ev := append([]StateEvent(nil), in.States...)
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].At.Before(ev[j].At) })
	var out []Segment
	open := false
	for _, e := range ev {
		switch e.State {
		case "running":
			if !open {
				out = append(out, Segment{Start: e.At, FromEvents: true})
				open = true
			}
		case "stopping", "stopped", "shutting-down", "terminated":
			if open {
				out[len(out)-1].End = e.At
				open = false
			}
		}
	}
	if open && !in.End.IsZero() && !in.End.Before(out[len(out)-1].Start) {
		out[len(out)-1].End = in.End
	}
	return out
}

// Billed is one segment's bill.
type Billed struct {
	Segment
	Open    bool    // still running: billed up to now
	Seconds int64   // max(60, whole seconds run)
	USD     float64 // after the waiver
	Gross   float64 // before it
	Waived  bool
}

// Bill prices the instance's segments the way EC2 bills Linux usage: per
// second of running, at least 60 s a segment, at PriceUSD; a spot
// instance EC2 reclaimed within the first hour of its last segment is not
// charged for it. Open segments count up to now.
func (in Instance) Bill(now time.Time) []Billed {
	segs := in.Segments()
	out := make([]Billed, 0, len(segs))
	for i, s := range segs {
		b := Billed{Segment: s, Open: s.End.IsZero()}
		end := s.End
		if b.Open {
			end = now
		}
		secs := int64(end.Sub(s.Start) / time.Second)
		b.Seconds = max(secs, MinBilledSeconds)
		b.Gross = float64(b.Seconds) * in.PriceUSD / 3600
		b.USD = b.Gross
		if i == len(segs)-1 && !b.Open && in.Capacity == "spot" && in.EndReason == SpotWaiverCode && end.Sub(s.Start) < time.Hour {
			b.Waived, b.USD = true, 0
		}
		out = append(out, b)
	}
	return out
}

// Total sums the bill: billed seconds, USD after and before the waiver.
func Total(bs []Billed) (secs int64, usd, gross float64) {
	for _, b := range bs {
		secs += b.Seconds
		usd += b.USD
		gross += b.Gross
	}
	return secs, usd, gross
}

// Owner policy for the time no job ran on an instance (boot, idle, the
// warm-reuse window, the 60 s minimum).
const (
	OwnerLaunchingJob = "launching-job" // the job the instance was launched for
	OwnerPool         = "pool"          // the class's pool account, PoolAccount(class)
)

// PoolAccount is the account idle time is charged to under OwnerPool.
func PoolAccount(class string) string { return "pool:" + class }

// Charge is the part of an instance's bill one owner pays.
type Charge struct {
	InstanceID  string
	JobID       string
	Account     string
	User        string
	Idle        bool // boot, idle and minimum time (the owner's), not a job's run
	Seconds     float64
	USD         float64
	OnDemandUSD float64
}

// Charges splits the instance's bill within [from, to) between the jobs
// that ran on its node (each for the time it ran; jobs sharing the node
// share that time by GPUs) and the owner of the rest (owner:
// OwnerLaunchingJob or OwnerPool). A segment's billed span is
// [start, start+billed seconds], the 60 s minimum included; the charges of
// a segment add up to its bill.
func (in Instance) Charges(from, to, now time.Time, owner string) []Charge {
	idle := Charge{InstanceID: in.ID, JobID: in.JobID, Account: in.Account, User: in.User, Idle: true}
	if owner == OwnerPool || in.JobID == "" && in.Account == "" {
		// an instance launched for no job (a manual power-up, the warm
		// pool) has no launching job to pay for it: its class's pool does
		idle = Charge{InstanceID: in.ID, Account: PoolAccount(in.Class), Idle: true}
	}
	jobs := map[string]*Charge{}
	var order []string
	for _, b := range in.Bill(now) {
		s := b.Start
		e := s.Add(time.Duration(b.Seconds) * time.Second)
		cs, ce := Later(s, from), Earlier(e, to)
		if !ce.After(cs) {
			continue
		}
		usdPerSec, odPerSec := 0.0, in.OnDemandUSD/3600
		if !b.Waived {
			usdPerSec = in.PriceUSD / 3600
		}
		shares := in.shares(cs, ce, now)
		used := 0.0
		for _, sh := range shares {
			c := jobs[sh.run.JobID]
			if c == nil {
				c = &Charge{InstanceID: in.ID, JobID: sh.run.JobID, Account: sh.run.Account, User: sh.run.User}
				jobs[sh.run.JobID] = c
				order = append(order, sh.run.JobID)
			}
			c.Seconds += sh.secs
			c.USD += sh.secs * usdPerSec
			c.OnDemandUSD += sh.secs * odPerSec
			used += sh.secs
		}
		// what no job used is the owner's: boot, idle, the 60 s minimum
		rest := math.Max(ce.Sub(cs).Seconds()-used, 0)
		idle.Seconds += rest
		idle.USD += rest * usdPerSec
		idle.OnDemandUSD += rest * odPerSec
	}
	out := make([]Charge, 0, len(order)+1)
	for _, id := range order {
		out = append(out, *jobs[id])
	}
	if idle.Seconds > 0 {
		out = append(out, idle)
	}
	return out
}

type share struct {
	run  Run
	secs float64
}

// shares splits [cs, ce) between the runs on the node: at each moment the
// jobs running share it by their GPUs on the node.
func (in Instance) shares(cs, ce, now time.Time) []share {
	type iv struct {
		r      Run
		rs, re time.Time
	}
	var ivs []iv
	edges := []time.Time{cs, ce}
	for _, r := range in.Runs {
		re := r.End
		if re.IsZero() {
			re = Later(now, ce)
		}
		rs, re := Later(r.Start, cs), Earlier(re, ce)
		if re.After(rs) {
			ivs = append(ivs, iv{r, rs, re})
			edges = append(edges, rs, re)
		}
	}
	if len(ivs) == 0 {
		return nil
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].Before(edges[j]) })
	acc := make([]float64, len(ivs))
	for k := 0; k+1 < len(edges); k++ {
		a, z := edges[k], edges[k+1]
		if !z.After(a) {
			continue
		}
		weight := 0
		for _, v := range ivs {
			if !v.rs.After(a) && !v.re.Before(z) {
				weight += max(v.r.GPUs, 1)
			}
		}
		for i, v := range ivs {
			if !v.rs.After(a) && !v.re.Before(z) {
				acc[i] += z.Sub(a).Seconds() * float64(max(v.r.GPUs, 1)) / float64(weight)
			}
		}
	}
	out := make([]share, len(ivs))
	for i, v := range ivs {
		out[i] = share{v.r, acc[i]}
	}
	return out
}

// Later is the later of two times, Earlier the earlier.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func Earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Burn is what the instances running now cost per hour, by the account
// they are charged to at this moment (the jobs on them by GPUs, else the
// idle owner).
func Burn(ins []Instance, now time.Time, owner string) map[string]float64 {
	out := map[string]float64{}
	for _, in := range ins {
		bs := in.Bill(now)
		if len(bs) == 0 || !bs[len(bs)-1].Open {
			continue
		}
		var on []Run
		weight := 0
		for _, r := range in.Runs {
			if !r.Start.After(now) && (r.End.IsZero() || r.End.After(now)) {
				on = append(on, r)
				weight += max(r.GPUs, 1)
			}
		}
		if len(on) == 0 {
			acct := in.Account
			if owner == OwnerPool || in.JobID == "" && in.Account == "" {
				acct = PoolAccount(in.Class)
			}
			out[acct] += in.PriceUSD
			continue
		}
		for _, r := range on {
			out[r.Account] += in.PriceUSD * float64(max(r.GPUs, 1)) / float64(weight)
		}
	}
	return out
}

// Forecast is when an account reaches its cap at the current burn rate,
// counting what is reserved for its running jobs as spent: zero when the
// account does not burn, or will not reach the cap this month.
func Forecast(capUSD, spentUSD, reservedUSD, burnUSDPerHour float64, now time.Time) time.Time {
	left := capUSD - spentUSD - reservedUSD
	if left <= 0 {
		return now
	}
	if burnUSDPerHour <= 0 {
		return time.Time{}
	}
	at := now.Add(time.Duration(left / burnUSDPerHour * float64(time.Hour))).Round(time.Second)
	if !at.Before(MonthStart(now).AddDate(0, 1, 0)) {
		return time.Time{}
	}
	return at
}
