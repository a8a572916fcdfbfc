package forecast

import (
	"math"
	"sort"
	"time"
)

// PoissonQuantile is the smallest s >= 0 with P(N <= s) >= q for N ~
// Poisson(mean). A mean <= 0 (or NaN) gives 0.
func PoissonQuantile(mean, q float64) int {
	if !(mean > 0) || !(q > 0) {
		return 0
	}
	if q >= 1 {
		q = math.Nextafter(1, 0)
	}
	if mean > 1e5 {
		// Normal approximation with continuity correction (the Poisson's
		// skew is below 0.004 here); exact summation below that.
		z := normalQuantile(q)
		return max(0, int(math.Ceil(mean+z*math.Sqrt(mean)-0.5)))
	}
	// p_0 = e^-mean, p_k = p_{k-1} mean / k, in log space: the terms that
	// underflow (below e^-745) carry no mass that matters
	logp, lm := -mean, math.Log(mean)
	cdf := math.Exp(logp)
	k := 0
	for cdf < q && k < 2e6 {
		k++
		logp += lm - math.Log(float64(k))
		cdf += math.Exp(logp)
	}
	return k
}

// normalQuantile is the standard normal quantile (Acklam's rational
// approximation, relative error below 1.2e-9).
func normalQuantile(p float64) float64 {
	a := [...]float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := [...]float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := [...]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := [...]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	const lo = 0.02425
	switch {
	case p < lo:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-lo:
		q := math.Sqrt(-2 * math.Log(1-p))
		return -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	}
	q := p - 0.5
	r := q * q
	return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
}

// CapNodes is the most nodes a class may keep warm under a daily cap:
// floor(usdPerDay / (24 h x usdPerHour)). A cap <= 0 or an unknown price
// (<= 0) allows none.
func CapNodes(usdPerDay, usdPerHour float64) int {
	if !(usdPerDay > 0) || !(usdPerHour > 0) {
		return 0
	}
	n := math.Floor(usdPerDay/(24*usdPerHour) + 1e-9)
	if n > 1e6 {
		return 1e6
	}
	return int(n)
}

// Idle is one warm node waiting for a job.
type Idle struct {
	Name  string    // node name (or any caller key)
	Since time.Time // when it became idle (or came up, for a node launched ahead)
	Up    time.Time // when it was launched (billing starts)
}

// State is what a class has warm now.
type State struct {
	Idle    []Idle // the pool's warm nodes, up and idle
	Booting int    // nodes launched ahead for the pool, not yet up and not taken by a job
	// Lingering are other idle nodes of the class that the pool does not
	// own (a node kept for a waiting job after its own job ended): they
	// count towards the target but are neither released nor capped here.
	Lingering int
}

// Plan is one decision for one class.
type Plan struct {
	RatePerHour float64  // the forecast lambda (nodes per hour)
	Quantile    float64  // the quantile kept (Forecast.Quantile: q, raised while jobs are missed)
	MissRate    float64  // the class's recent share of jobs that found no warm node
	Want        int      // Poisson quantile before the cap
	CapNodes    int      // the cap in nodes
	Target      int      // min(Want, CapNodes)
	Launch      int      // nodes to launch ahead now
	Release     []string // pool nodes to release now
	Cancel      int      // booting pool nodes to terminate now (only above the cap)
	Capped      bool     // the cap cut the target
}

// Decide plans one class at now. It launches ahead when the warm nodes
// (idle, booting and lingering) are fewer than the target; releases the
// pool's idle nodes above the target once they have been idle MinIdle and
// billed 60 s (longest idle first); and, the cap being hard, releases (and
// cancels booting) pool nodes above the cap at once. capNodes is CapNodes of
// the class's cap and price.
func Decide(f *Forecast, now time.Time, capNodes int, s State) Plan {
	p := Plan{RatePerHour: f.Rate(now), Quantile: f.Quantile(), MissRate: f.MissRate(), CapNodes: max(capNodes, 0)}
	p.Want = PoissonQuantile(p.RatePerHour*f.p.LeadTime.Hours(), p.Quantile)
	p.Target = min(p.Want, p.CapNodes)
	p.Capped = p.Want > p.CapNodes
	booting := max(s.Booting, 0)
	if have := len(s.Idle) + booting + max(s.Lingering, 0); have < p.Target {
		p.Launch = p.Target - have
	}
	idle := append([]Idle(nil), s.Idle...)
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].Since.Before(idle[j].Since) })
	hard := max(0, len(idle)+booting-p.CapNodes)
	soft := max(0, len(idle)-p.Target)
	for i, n := range idle {
		switch {
		case i < hard:
			p.Release = append(p.Release, n.Name)
		case len(p.Release) < soft && now.Sub(n.Since) >= f.p.MinIdle && now.Sub(n.Up) >= minBilled:
			p.Release = append(p.Release, n.Name)
		}
	}
	if hard > len(idle) {
		p.Cancel = hard - len(idle)
	}
	return p
}

// Keep says whether a node that just finished a job (or came up) should
// join the pool: the class has fewer than Target warm nodes without it.
func (p Plan) Keep(warmWithout int) bool { return warmWithout < p.Target }
