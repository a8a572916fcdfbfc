package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// BenchmarkReleaseLatency measures the time from a job's end (its last line
// prints the time) to the TerminateInstances call that releases its
// instance (for an instance that ran several jobs, from the last one's end;
// see releaseSamples): event-driven release (EpilogSlurmctld), over 60 jobs on 10
// nodes, against SuspendTime-based release (the idle timer every other tool
// uses), over 10 jobs, in the same run. It prints the median, p99 and worst
// and, for the slowest jobs, what slurmctld and burst logged about the
// job's node between its end and the terminate call (the explanation of
// the tail). BURST_BENCH_LOGS=DIR keeps both logs there.
// go test -run '^$' -bench ReleaseLatency ./test/e2e
func BenchmarkReleaseLatency(b *testing.B) {
	for _, mode := range []struct {
		name  string
		event bool
		jobs  int
	}{{"epilog", true, 60}, {"suspend-time-10s", false, 10}} {
		if testing.Short() { // make test's smoke run: the smallest size, once
			mode.jobs = 2
		}
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lat, ctld, after, version := releaseLatencies(b, mode.event, mode.jobs)
				med, p99, worst := quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
				b.ReportMetric(med, "median-s")
				b.ReportMetric(p99, "p99-s")
				b.ReportMetric(worst, "worst-s")
				fmt.Printf("release %s, Slurm %s: %d jobs, %d releases, job end -> TerminateInstances median %.2f s, p99 %.2f s, worst %.2f s\n",
					mode.name, version, mode.jobs, len(lat), med, p99, worst)
				if len(ctld) > 0 {
					fmt.Printf("  of which job end -> slurmctld's _job_complete (Slurm: slurmstepd's report) median %.2f s, p99 %.2f s, worst %.2f s;"+
						" _job_complete -> TerminateInstances median %.2f s, p99 %.2f s, worst %.2f s (%d releases)\n",
						quantile(ctld, 0.5), quantile(ctld, 0.99), quantile(ctld, 1), quantile(after, 0.5), quantile(after, 0.99), quantile(after, 1), len(ctld))
				}
			}
		})
	}
}

// quantile is the nearest-rank q-quantile of xs (q=1: the largest).
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// releaseSample is one job's release: its end (the job's own clock) and
// the first TerminateInstances naming its instance.
type releaseSample struct {
	job, node, instance string
	end, term           time.Time
}

func (r releaseSample) seconds() float64 { return r.term.Sub(r.end).Seconds() }

// releaseLatencies returns, per release, job end -> TerminateInstances and,
// where slurmctld logged the job's completion, its two parts: job end ->
// slurmctld's _job_complete, and _job_complete -> TerminateInstances.
func releaseLatencies(b *testing.B, event bool, jobs int) (lat, ctld, after []float64, version string) {
	s, err := stack.Start(context.Background(), stack.Options{BinDir: binDir, KeepDir: os.Getenv("BURST_KEEP") == "1",
		Emulator: ec2emu.Options{BootDelay: time.Second, ShutdownDelay: time.Second},
		Configure: func(c *config.Config) {
			c.Classes[1].MaxNodes = 10
			c.Teardown.ReleaseOnCompletion = event
			c.Teardown.WarmReuse = config.D(0)
			c.Slurm.SuspendTime = config.D(10 * time.Second)
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	version = s.Cluster.Slurm().Release
	ctx := context.Background()
	var ids []string
	for i := 0; i < jobs; i++ {
		id, err := s.Cluster.Sbatch(ctx, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2; echo NODE=$SLURMD_NODENAME; date +END=%s.%N")
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		_, err := s.Cluster.WaitJobState(wctx, id, "COMPLETED")
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(liveInstances(s)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	samples, reused := releaseSamples(s, ids)
	fmt.Printf("  %d jobs, %d instances released; %d jobs ran on a node Slurm gave them between the previous job's end and its release\n",
		len(ids), len(samples), reused)
	if len(samples) == 0 {
		b.Fatal("no job end -> terminate pairs measured")
	}
	if dir := os.Getenv("BURST_BENCH_LOGS"); dir != "" {
		keepLogs(b, s, filepath.Join(dir, version+"-"+map[bool]string{true: "epilog", false: "suspend-time"}[event]))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].seconds() > samples[j].seconds() })
	if event {
		for _, w := range samples[:min(2, len(samples))] {
			explainRelease(s, w)
		}
		// how long slurmctld's scheduling cycles held its locks (a
		// completion report waits for them)
		if out, err := s.Cluster.Run(ctx, "sdiag"); err == nil {
			fmt.Printf("  sdiag: %s\n", sdiagCycles(out))
		}
	}
	done := jobCompleteTimes(s.Cluster.SlurmctldLog())
	for _, r := range samples {
		lat = append(lat, r.seconds())
		if at, ok := done[r.job]; ok {
			ctld = append(ctld, at.Sub(r.end).Seconds())
			after = append(after, r.term.Sub(at).Seconds())
		}
	}
	return lat, ctld, after, version
}

// jobCompleteTimes reads slurmctld's "_job_complete: JobId=N done" times.
func jobCompleteTimes(path string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, l := range logWindow(path, time.Time{}, time.Now().Add(time.Hour), slurmctldTime, func(l string) bool {
		return strings.Contains(l, "_job_complete: JobId=") && strings.HasSuffix(l, " done")
	}) {
		at, _ := slurmctldTime(l)
		i := strings.Index(l, "JobId=") + len("JobId=")
		j := strings.IndexByte(l[i:], ' ')
		if j > 0 {
			out[l[i:i+j]] = at
		}
	}
	return out
}

// releaseSamples measures each terminated instance's release from the end
// of the last job that ran on its node while it lived: Slurm may schedule a
// waiting job onto a node in the moment between a job's end and its
// EpilogSlurmctld's POWER_DOWN_ASAP (which then waits for that job), and
// the instance is released at the end of that job, not of the first.
func releaseSamples(s *stack.Stack, ids []string) (out []releaseSample, reused int) {
	termAt := map[string]time.Time{}
	for _, c := range s.Emu.Calls() {
		if c.Action != "TerminateInstances" || c.Code != "" {
			continue
		}
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") {
				if _, seen := termAt[v[0]]; !seen {
					termAt[v[0]] = c.At
				}
			}
		}
	}
	type ran struct {
		job string
		end time.Time
	}
	byNode := map[string][]ran{}
	for _, id := range ids {
		raw, err := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "slurm-"+id+".out"))
		if err != nil {
			continue
		}
		var node string
		var end float64
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "NODE="); ok {
				node = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(l, "END="); ok {
				end, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		if node == "" || end == 0 {
			continue
		}
		sec, frac := math.Modf(end)
		byNode[node] = append(byNode[node], ran{id, time.Unix(int64(sec), int64(frac*1e9))})
	}
	for _, in := range s.Emu.Instances() {
		at, ok := termAt[in.ID]
		if !ok {
			continue
		}
		node := ec2p.NodeOf(in.Tags)
		var last ran
		n := 0
		for _, r := range byNode[node] {
			if r.end.After(in.LaunchTime) && r.end.Before(at) {
				n++
				if r.end.After(last.end) {
					last = r
				}
			}
		}
		if n == 0 {
			continue
		}
		reused += n - 1
		out = append(out, releaseSample{job: last.job, node: node, instance: in.ID, end: last.end, term: at})
	}
	return out, reused
}

// explainRelease prints what slurmctld and burst logged about a slow
// release's node and job between the job's end and the terminate call.
func explainRelease(s *stack.Stack, r releaseSample) {
	fmt.Printf("  slow release: job %s on %s (%s): ended %s, TerminateInstances %s (%.2f s)\n",
		r.job, r.node, r.instance, r.end.Format("15:04:05.000"), r.term.Format("15:04:05.000"), r.seconds())
	from, to := r.end.Add(-500*time.Millisecond), r.term.Add(500*time.Millisecond)
	ctld := logWindow(s.Cluster.SlurmctldLog(), from, to, slurmctldTime, func(l string) bool {
		return mentionsNode(l, r.node) || strings.Contains(l, "JobId="+r.job+" ") || strings.Contains(l, "power_save")
	})
	burst := logWindow(filepath.Join(s.Dir, "burst.log"), from, to, burstLogTime, func(l string) bool {
		return mentionsNode(l, r.node) || strings.Contains(l, `"job":`+r.job+`,`) || strings.Contains(l, `"job":"`+r.job+`"`)
	})
	for _, part := range []struct {
		name  string
		lines []string
	}{{"slurmctld.log", ctld}, {"burst.log", burst}} {
		fmt.Printf("  --- %s (%d lines about %s / job %s in the window)\n", part.name, len(part.lines), r.node, r.job)
		for i, l := range part.lines {
			if i == 40 {
				fmt.Printf("  ... %d more\n", len(part.lines)-i)
				break
			}
			fmt.Printf("  %.300s\n", l)
		}
	}
}

// mentionsNode: the line names node as a whole word (a10g-1, not a10g-10).
func mentionsNode(l, node string) bool {
	for i := 0; ; {
		j := strings.Index(l[i:], node)
		if j < 0 {
			return false
		}
		k := i + j + len(node)
		if k == len(l) || !strings.ContainsRune("0123456789", rune(l[k])) {
			return true
		}
		i = k
	}
}

// slurmctldTime reads a slurmctld log line's "[2026-12-01T13:18:35.123]".
func slurmctldTime(l string) (time.Time, bool) {
	if len(l) < 25 || l[0] != '[' {
		return time.Time{}, false
	}
	end := strings.IndexByte(l, ']')
	if end < 0 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05.000", l[1:end], time.Local)
	return t, err == nil
}

// burstLogTime reads a burst.log (slog JSON) line's "time".
func burstLogTime(l string) (time.Time, bool) {
	i := strings.Index(l, `"time":"`)
	if i < 0 {
		return time.Time{}, false
	}
	v := l[i+8:]
	j := strings.IndexByte(v, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v[:j])
	return t, err == nil
}

func logWindow(path string, from, to time.Time, at func(string) (time.Time, bool), keep func(string) bool) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		t, ok := at(l)
		if ok && !t.Before(from) && !t.After(to) && keep(l) {
			out = append(out, l)
		}
	}
	return out
}

func keepLogs(b *testing.B, s *stack.Stack, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("keeping logs: %v", err)
		return
	}
	for _, p := range []string{s.Cluster.SlurmctldLog(), filepath.Join(s.Dir, "burst.log")} {
		if raw, err := os.ReadFile(p); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(p)), raw, 0o644)
		}
	}
	fmt.Printf("  logs kept in %s\n", dir)
}

// sdiagCycles picks the main and backfill schedulers' cycle figures
// (microseconds) out of sdiag's report.
func sdiagCycles(out string) string {
	var parts []string
	section := ""
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Main schedule statistics"):
			section = "main"
		case strings.HasPrefix(l, "Backfilling stats"):
			section = "backfill"
		case strings.HasPrefix(l, "Remote Procedure Call"):
			section = ""
		case section != "" && (strings.HasPrefix(l, "Max cycle:") || strings.HasPrefix(l, "Mean cycle:") || strings.HasPrefix(l, "Total cycles:")):
			parts = append(parts, section+" "+strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(parts, ", ") + " (microseconds)"
}
