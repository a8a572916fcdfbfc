package config

import (
	"fmt"
	"math"
)

func (v *validator) warm() {
	w := v.c.Warm
	v.positive("warm.interval", w.Interval)
	v.positive("warm.half_life", w.HalfLife)
	v.positive("warm.lead_time", w.LeadTime)
	if !(w.Quantile > 0 && w.Quantile < 1) {
		v.add("warm.quantile", "%v: want a share between 0 and 1, e.g. 0.95", w.Quantile)
	}
	if !(w.ProfileWeight >= 0 && w.ProfileWeight <= 1) {
		v.add("warm.profile_weight", "%v: want a number from 0 (recent rate only) to 1 (hour-of-week profile only)", w.ProfileWeight)
	}
	capped := false
	for i, cl := range v.c.Classes {
		switch {
		case math.IsNaN(cl.WarmUSDPerDay) || math.IsInf(cl.WarmUSDPerDay, 0) || cl.WarmUSDPerDay < 0:
			v.add(fmt.Sprintf("classes[%d].warm_usd_per_day", i), "%v: want US dollars per day >= 0 (0 keeps no node of the class warm)", cl.WarmUSDPerDay)
		case cl.WarmUSDPerDay > 0:
			capped = true
		}
	}
	if w.Enabled && !capped && len(v.c.Classes) > 0 {
		v.add("warm.enabled", "no class has a warm pool: set classes[].warm_usd_per_day on the classes to keep warm")
	}
}

func (v *validator) budgets() {
	seen := map[string]bool{}
	for i, b := range v.c.Budgets {
		path := fmt.Sprintf("budgets[%d]", i)
		if b.Account == "" {
			v.add(path+".account", "budget without an account: name the Slurm account it caps")
		} else if seen[b.Account] {
			v.add(path+".account", "account %q has two budgets; keep one", b.Account)
		}
		seen[b.Account] = true
		if b.MonthlyUSD <= 0 {
			v.add(path+".monthly_usd", "must be a positive amount of US dollars, got %v", b.MonthlyUSD)
		}
		switch b.OnUnknown {
		case "", OnUnknownHold, OnUnknownAllow:
		default:
			v.add(path+".on_unknown", "%q: want hold (the account's jobs wait while its spend cannot be known) or allow", b.OnUnknown)
		}
	}
}

func (v *validator) limits() {
	seen := map[[2]string]bool{}
	for i, l := range v.c.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		if l.Account == "" && l.User == "" {
			v.add(path, "a limit needs an account, a user, or both")
		}
		k := [2]string{l.Account, l.User}
		if seen[k] && (l.Account != "" || l.User != "") {
			v.add(path, "a second limit for account %q user %q; keep one", l.Account, l.User)
		}
		seen[k] = true
		if l.MaxGPUs < 0 {
			v.add(path+".max_gpus", "must not be negative, got %d", l.MaxGPUs)
		}
		if l.MaxNodes < 0 {
			v.add(path+".max_nodes", "must not be negative, got %d", l.MaxNodes)
		}
		if l.MaxGPUs == 0 && l.MaxNodes == 0 {
			v.add(path, "limits nothing: set max_gpus, max_nodes or both")
		}
		for _, f := range [][2]string{{"account", l.Account}, {"user", l.User}} {
			if f[1] != "" && !slurmNameRe.MatchString(f[1]) {
				v.add(path+"."+f[0], "%q is not a Slurm %s name", f[1], f[0])
			}
		}
	}
}

func (v *validator) accounting() {
	a := v.c.Accounting
	switch a.IdleOwner {
	case "launching-job", "pool":
	default:
		v.add("accounting.idle_owner", "%q: want launching-job (the job the instance was launched for pays for its boot and idle time) or pool (the class's pool account)", a.IdleOwner)
	}
	v.positive("accounting.default_time_limit", a.DefaultTimeLimit)
}
