package config

import (
	"time"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// GPUHealth configures burst-agent's GPU health monitor (agent/healthwatch;
// the event table is internal/gpuhealth's, docs/OPERATIONS.md shows it).
type GPUHealth struct {
	// Off turns the monitor off (default: on).
	Off bool `yaml:"off"`
	// Interval is each pass's wait on the GPUs' event sets (default 5s).
	Interval Duration `yaml:"interval"`
	// SlowdownAfter: a hardware thermal or power-brake slowdown lasting
	// this long replaces the node (default 5m).
	SlowdownAfter Duration `yaml:"slowdown_after"`
	// NVLinkErrors: this many new NVLink errors on a GPU replace the node
	// (default 100).
	NVLinkErrors uint64 `yaml:"nvlink_errors"`
	// Xid overrides the action of Xid codes: "79": replace|note|ignore.
	Xid map[string]string `yaml:"xid"`
	// Events overrides the action of the other event kinds, e.g.
	// clock_slowdown: note.
	Events map[string]string `yaml:"events"`
	// DCGMLevel runs `dcgmi diag -r <level>` (1 quick .. 4 long) in the
	// boot gate before slurmd starts, on real GPUs; 0 (default) does not.
	DCGMLevel int `yaml:"dcgm_level"`
	// DCGMTimeout bounds dcgmi diag (default 2m): a diagnostic that hangs
	// fails the gate.
	DCGMTimeout Duration `yaml:"dcgm_timeout"`
}

// Overrides returns the table overrides (Validate has checked them).
func (g GPUHealth) Overrides() gpuhealth.Overrides {
	o, _ := gpuhealth.ParseOverrides(g.Xid, g.Events)
	return o
}

func (v *validator) gpuHealth() {
	g := v.c.GPUHealth
	_, errs := gpuhealth.ParseOverrides(g.Xid, g.Events)
	for _, err := range errs {
		// the error starts with its key: xid.79: ...
		msg := err.Error()
		key, rest := msg, ""
		for i := 0; i < len(msg)-1; i++ {
			if msg[i] == ':' && msg[i+1] == ' ' {
				key, rest = msg[:i], msg[i+2:]
				break
			}
		}
		v.add("gpu_health."+key, "%s", rest)
	}
	for path, d := range map[string]Duration{"gpu_health.interval": g.Interval, "gpu_health.slowdown_after": g.SlowdownAfter} {
		if d.Duration < 0 {
			v.add(path, "%v is negative: give a positive duration such as 5s, or leave it out for the default", d.Duration)
		}
	}
	if g.DCGMLevel < 0 || g.DCGMLevel > 4 {
		v.add("gpu_health.dcgm_level", "%d: want 0 (off) or a dcgmi diag run level 1..4", g.DCGMLevel)
	}
	if g.DCGMTimeout.Duration < 0 || g.DCGMTimeout.Duration > 30*time.Minute {
		v.add("gpu_health.dcgm_timeout", "%v: want a positive duration up to 30m", g.DCGMTimeout.Duration)
	}
	if g.Interval.Duration > time.Minute {
		v.add("gpu_health.interval", "%v: at most 1m (a GPU fault would go unseen that long)", g.Interval.Duration)
	}
}
