// Package forecast is burst's warm-capacity policy: per node class, a small
// forecast of node demand (an exponentially weighted recent rate blended
// with an hour-of-week profile learned from the class's own history) and the
// number of nodes to keep warm so that the demand expected during one boot
// finds a node already up, bounded by a hard daily cost cap.
//
// The model (also in sizer/README.md, "Warm capacity"):
//
//	recent rate   r(t) = sum over arrivals i at t_i <= t of n_i * exp(-(t - t_i)/tau) / tau,
//	              tau = HalfLife / ln 2                      (nodes per second)
//	profile       p[b] for each hour of the week b (UTC), the EWMA over weeks of the
//	              nodes that arrived in that hour: p[b] <- (1-beta) p[b] + beta * count
//	              (beta = ProfileLearn), per second
//	forecast      lambda(t) = (1-w) r(t) + w p[bin(t)]   (w = ProfileWeight; w = 0 until
//	              bin(t) has been seen once)
//	target        S = min { s : P(N <= s) >= q },  N ~ Poisson(lambda(t) * L)
//	              (q = Quantile, L = LeadTime: one boot)
//	miss feedback m <- m + a (x - m) per job's first start (x = 1 when it found no warm
//	              node), a = (1-q)/10; while m > 1-q the target keeps q' = 1 - (1-q)^2/m
//	              instead of q (Outcome, Quantile)
//	cap           S <= floor(cap_usd_per_day / (24 h * price per node-hour))
//
// S is the q-quantile of the nodes the class will be asked for during one
// boot: if S nodes are warm, and every node taken is replaced at once
// (launch ahead), an arrival finds a warm node unless more than S nodes are
// asked for within one boot. The cap holds by construction: at most S nodes
// wait warm at any moment, so a day of warm capacity costs at most
// S x 24 h x price <= cap.
//
// Everything here is pure: no clock, no I/O. burst-sizer serve and the
// simulator (sizer/simulate) run the same code.
package forecast

import (
	"fmt"
	"math"
	"time"
)

// Params of the forecast and the decision. The zero value of each field
// means its default.
type Params struct {
	// HalfLife of the recent-rate estimate (default 30 min): an arrival's
	// weight halves every HalfLife, so a burst of arrivals raises the
	// forecast at once and it decays after arrivals stop.
	HalfLife time.Duration
	// ProfileWeight is w in lambda = (1-w) r + w p (default 0.5; negative
	// means 0, recent rate only; at most 1, profile only).
	ProfileWeight float64
	// ProfileLearn is beta, the weight of the newest week in each
	// hour-of-week bin (default 0.3; 1 keeps only the last week).
	ProfileLearn float64
	// Quantile is q, the share of one boot's demand the warm nodes cover
	// (default 0.95).
	Quantile float64
	// LeadTime is L, how long a replacement takes to come up: one boot
	// (default 2 min).
	LeadTime time.Duration
	// FixedQuantile turns the miss feedback off: the target is always the
	// Quantile of the Poisson demand, however many jobs the pool misses.
	FixedQuantile bool
	// MinIdle is how long a warm node stays up at least before it may be
	// released when the forecast drops (default LeadTime, and never below
	// EC2's 60 s billing minimum): it keeps the pool from churning on the
	// forecast's small moves.
	MinIdle time.Duration
}

// Defaults of Params; each is a stated assumption (sizer/README.md).
const (
	DefaultHalfLife      = 30 * time.Minute
	DefaultProfileWeight = 0.5
	DefaultProfileLearn  = 0.3
	DefaultQuantile      = 0.95
	DefaultLeadTime      = 2 * time.Minute
	minBilled            = 60 * time.Second
)

// WithDefaults fills zero fields.
func (p Params) WithDefaults() Params {
	if p.HalfLife == 0 {
		p.HalfLife = DefaultHalfLife
	}
	if p.ProfileWeight == 0 {
		p.ProfileWeight = DefaultProfileWeight
	}
	if p.ProfileWeight < 0 {
		p.ProfileWeight = 0
	}
	if p.ProfileLearn == 0 {
		p.ProfileLearn = DefaultProfileLearn
	}
	if p.Quantile == 0 {
		p.Quantile = DefaultQuantile
	}
	if p.LeadTime == 0 {
		p.LeadTime = DefaultLeadTime
	}
	if p.MinIdle == 0 {
		p.MinIdle = p.LeadTime
	}
	if p.MinIdle < minBilled {
		p.MinIdle = minBilled
	}
	return p
}

// Validate reports the first problem of defaulted parameters.
func (p Params) Validate() error {
	switch {
	case p.HalfLife <= 0:
		return fmt.Errorf("half life %v: want a positive duration", p.HalfLife)
	case p.ProfileWeight > 1 || math.IsNaN(p.ProfileWeight):
		return fmt.Errorf("profile weight %g: want a number in [0,1]", p.ProfileWeight)
	case !(p.ProfileLearn > 0 && p.ProfileLearn <= 1):
		return fmt.Errorf("profile learning rate %g: want a number in (0,1]", p.ProfileLearn)
	case !(p.Quantile > 0 && p.Quantile < 1):
		return fmt.Errorf("quantile %g: want a number in (0,1)", p.Quantile)
	case p.LeadTime <= 0:
		return fmt.Errorf("lead time %v: want a positive duration", p.LeadTime)
	}
	return nil
}

const hoursPerWeek = 7 * 24

// Forecast is one class's demand forecast. It is not safe for concurrent
// use. The zero value is not usable; call NewForecast.
type Forecast struct {
	p   Params
	tau float64 // seconds

	// recent rate: v is r at time last (nodes per second)
	v    float64
	last time.Time
	init bool

	// miss feedback: the EWMA of the share of jobs that found no warm node
	// (Outcome), over about missWindow outcomes; 0 until the first one
	miss float64

	// hour-of-week profile (nodes per hour), learned at hour rollovers
	prof    [hoursPerWeek]float64
	seen    [hoursPerWeek]bool
	hour    int64   // absolute hour (Unix seconds / 3600) being counted
	count   float64 // nodes asked for in that hour so far
	started bool
}

// NewForecast returns an empty forecast (rate 0) with p's defaults filled.
func NewForecast(p Params) *Forecast {
	p = p.WithDefaults()
	return &Forecast{p: p, tau: p.HalfLife.Seconds() / math.Ln2}
}

// Params returns the forecast's parameters, defaults filled.
func (f *Forecast) Params() Params { return f.p }

func hourOf(t time.Time) int64 { return int64(math.Floor(float64(t.Unix()) / 3600)) }

func binOf(hour int64) int {
	// the Unix epoch was a Thursday 00:00 UTC; bin 0 is Monday 00:00-01:00
	b := (hour + 3*24) % hoursPerWeek
	if b < 0 {
		b += hoursPerWeek
	}
	return int(b)
}

// roll closes the hours before t's hour into the profile.
func (f *Forecast) roll(t time.Time) {
	h := hourOf(t)
	if !f.started {
		f.hour, f.started = h, true
		return
	}
	if h <= f.hour {
		return
	}
	// close f.hour with its count, then every empty hour up to h-1; more
	// than a few weeks of silence decays every bin to (1-beta)^weeks
	n := h - f.hour
	if n > 8*hoursPerWeek {
		n = 8 * hoursPerWeek
	}
	for k := int64(0); k < n; k++ {
		b := binOf(f.hour + k)
		c := 0.0
		if k == 0 {
			c = f.count
		}
		if f.seen[b] {
			f.prof[b] = (1-f.p.ProfileLearn)*f.prof[b] + f.p.ProfileLearn*c
		} else {
			f.prof[b], f.seen[b] = c, true
		}
	}
	f.hour, f.count = h, 0
}

// Observe records that a job asked the class for nodes at t. Times before
// the last one seen count as the last one.
func (f *Forecast) Observe(t time.Time, nodes int) {
	if nodes <= 0 {
		return
	}
	if f.init && t.Before(f.last) {
		t = f.last
	}
	f.roll(t)
	f.count += float64(nodes)
	f.v = f.decayed(t) + float64(nodes)/f.tau
	f.last, f.init = t, true
}

func (f *Forecast) decayed(t time.Time) float64 {
	if !f.init {
		return 0
	}
	dt := t.Sub(f.last).Seconds()
	if dt <= 0 {
		return f.v
	}
	return f.v * math.Exp(-dt/f.tau)
}

// Recent is r(t), the exponentially weighted recent rate, in nodes per
// hour.
func (f *Forecast) Recent(t time.Time) float64 { return 3600 * f.decayed(t) }

// Profile is p[bin(t)] in nodes per hour, and whether that hour of the week
// has been seen yet, including what the hours since the last arrival (all
// empty but the first) teach. It does not change the forecast.
func (f *Forecast) Profile(t time.Time) (float64, bool) {
	h := hourOf(t)
	b := binOf(h)
	v, seen := f.prof[b], f.seen[b]
	if !f.started || h <= f.hour {
		return v, seen
	}
	if h-f.hour > 8*hoursPerWeek {
		return 0, seen
	}
	// bin b is closed at the hours k in [f.hour, h) with binOf(k) == b: the
	// first one (if it is f.hour) with the count so far, the rest empty
	first := f.hour + int64((b-binOf(f.hour)+hoursPerWeek)%hoursPerWeek)
	if first >= h {
		return v, seen
	}
	m := (h-1-first)/hoursPerWeek + 1 // closings
	keep := 1 - f.p.ProfileLearn
	if first == f.hour {
		if seen {
			v = keep*v + f.p.ProfileLearn*f.count
		} else {
			v, seen = f.count, true
		}
		m--
	} else if !seen {
		v, seen = 0, true
		m--
	}
	return v * math.Pow(keep, float64(m)), seen
}

// Rate is the forecast lambda(t) in nodes per hour.
func (f *Forecast) Rate(t time.Time) float64 {
	r := f.Recent(t)
	p, ok := f.Profile(t)
	if !ok {
		return r
	}
	w := f.p.ProfileWeight
	return (1-w)*r + w*p
}

// Target is the number of nodes to keep warm at t, before any cap: the
// Quantile() of Poisson(Rate(t) x LeadTime).
func (f *Forecast) Target(t time.Time) int {
	return PoissonQuantile(f.Rate(t)*f.p.LeadTime.Hours(), f.Quantile())
}

// missWindow is how many outcomes the miss rate is averaged over, in units
// of 1/(1-q): at q = 0.95 about 200 jobs, among which 10 misses are what
// the pool aims at, enough to tell a miss rate of 1-q from one twice it.
const missWindow = 10

// Outcome records whether a job of the class found every node it asked for
// warm (up and idle: it waited only for Slurm's scheduling) or had to wait
// for at least part of a boot (a miss).
func (f *Forecast) Outcome(warm bool) {
	a := (1 - f.p.Quantile) / missWindow
	x := 0.0
	if !warm {
		x = 1
	}
	f.miss += a * (x - f.miss)
}

// MissRate is the recent share of the class's jobs that found no warm node
// (the EWMA of Outcome's misses; 0 before the first outcome).
func (f *Forecast) MissRate() float64 { return f.miss }

// Quantile is the quantile the target keeps: Params.Quantile q while the
// jobs the pool misses are no more than the 1-q it aims at, and above q by
// the factor the misses exceed it: 1 - (1-q) x (1-q)/m for a miss rate m,
// at most 1 - (1-q)^2 (m = 1). The Poisson model assumes arrivals
// independent at the forecast rate; a class whose jobs come in bursts
// (several within one boot) is missed more often than 1-q, and the
// feedback widens its target until its misses come down (the cap still
// bounds what that costs). With FixedQuantile it is always q.
func (f *Forecast) Quantile() float64 {
	q := f.p.Quantile
	tail := 1 - q
	if f.p.FixedQuantile || f.miss <= tail {
		return q
	}
	return 1 - tail*tail/f.miss
}

// Snapshot is a forecast's learned state, for keeping it across restarts.
type Snapshot struct {
	Rate     float64   `json:"rate_per_s"` // r at Last, nodes per second
	Last     time.Time `json:"last"`
	Profile  []float64 `json:"profile"` // nodes per hour by hour of the week (Monday 00:00 UTC first)
	Seen     []bool    `json:"seen"`
	Hour     int64     `json:"hour"`  // absolute hour being counted (Unix seconds / 3600)
	Count    float64   `json:"count"` // nodes asked for in it so far
	Observed bool      `json:"observed"`
	MissRate float64   `json:"miss_rate"` // Outcome's EWMA of misses (0 in a file from before the feedback)
}

// Snapshot returns the forecast's state.
func (f *Forecast) Snapshot() Snapshot {
	return Snapshot{Rate: f.v, Last: f.last, Profile: append([]float64(nil), f.prof[:]...), Seen: append([]bool(nil), f.seen[:]...),
		Hour: f.hour, Count: f.count, Observed: f.init && f.started, MissRate: f.miss}
}

// Restore replaces the forecast's state (its parameters stay). A state
// whose profile is not 168 hours long, or has negative or non-finite
// values, is refused.
func (f *Forecast) Restore(s Snapshot) error {
	if len(s.Profile) != hoursPerWeek || len(s.Seen) != hoursPerWeek {
		return fmt.Errorf("restoring a forecast: profile has %d hours, want %d", len(s.Profile), hoursPerWeek)
	}
	vals := append([]float64{s.Rate, s.Count}, s.Profile...)
	for i, v := range vals {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("restoring a forecast: value %d is %g", i, v)
		}
	}
	if !(s.MissRate >= 0 && s.MissRate <= 1) {
		return fmt.Errorf("restoring a forecast: miss rate %g is not a share in [0,1]", s.MissRate)
	}
	f.v, f.last, f.hour, f.count, f.miss = s.Rate, s.Last, s.Hour, s.Count, s.MissRate
	copy(f.prof[:], s.Profile)
	copy(f.seen[:], s.Seen)
	f.init, f.started = s.Observed, s.Observed
	return nil
}
