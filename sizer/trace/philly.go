package trace

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// PhillyColumns is the header of the Philly trace as packaged by
// petuum/adaptdl (branch osdi21-artifact, simulator/traces/philly.csv),
// derived from Microsoft's msr-fiddle/philly-traces (CC BY 4.0).
var PhillyColumns = []string{"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}

const phillyTime = "2006-01-02 15:04:05"

// ReadPhilly parses the Philly trace (`timestamp,duration,num_gpus,gpu_time,cluster`:
// submit time "2006-01-02 15:04:05", run seconds, GPUs, GPU-seconds,
// virtual-cluster id). The file is not sorted; the jobs come back sorted by
// submit time. The trace names no GPU model, so GPUModel is "". The cluster
// id goes into Metadata as "cluster=<id>". gpu_time must equal
// duration*num_gpus (within a second), a cheap check that columns are not
// shifted.
func ReadPhilly(r io.Reader, opt ReadOptions) ([]Job, Report, error) {
	loc := opt.loc()
	return readHeaderCSV(r, opt, "philly trace", PhillyColumns, func(line int, rec []string) (Job, bool, error) {
		j, err := phillyRow(line, rec, loc)
		return j, err == nil, err
	})
}

func phillyRow(line int, rec []string, loc *time.Location) (Job, error) {
	if len(rec) != len(PhillyColumns) {
		return Job{}, badRow(line, "has %d fields, want %d (%s)", len(rec), len(PhillyColumns), strings.Join(PhillyColumns, ","))
	}
	ts, err := time.ParseInLocation(phillyTime, strings.TrimSpace(rec[0]), loc)
	if err != nil {
		return Job{}, badRow(line, "timestamp %q is not %q", rec[0], phillyTime)
	}
	dur, err := parseSeconds(rec[1])
	if err != nil {
		return Job{}, badRow(line, "duration %q: %v", rec[1], err)
	}
	gpus, err := strconv.Atoi(strings.TrimSpace(rec[2]))
	if err != nil {
		return Job{}, badRow(line, "num_gpus %q is not a whole number", rec[2])
	}
	gt, err := strconv.ParseFloat(strings.TrimSpace(rec[3]), 64)
	if err != nil || math.IsNaN(gt) {
		return Job{}, badRow(line, "gpu_time %q is not a number of GPU-seconds", rec[3])
	}
	if want := dur.Seconds() * float64(gpus); math.Abs(gt-want) > 1+1e-9*want {
		return Job{}, badRow(line, "gpu_time %s is not duration x num_gpus (%g); are the columns shifted?", rec[3], want)
	}
	return Job{
		ID:       strconv.Itoa(line),
		Submit:   ts,
		Duration: dur,
		GPUs:     gpus,
		Metadata: "cluster=" + strings.TrimSpace(rec[4]),
	}, nil
}

// maxSeconds keeps durations inside time.Duration (about 292 years).
const maxSeconds = float64(math.MaxInt64/int64(time.Second)) / 2

// parseSeconds parses a non-negative number of seconds.
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a number of seconds")
	}
	if f < 0 {
		return 0, fmt.Errorf("is negative; want seconds >= 0")
	}
	if f > maxSeconds {
		return 0, fmt.Errorf("is too large (over %g s)", maxSeconds)
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}
