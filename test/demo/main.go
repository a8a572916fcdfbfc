// Command demo is `make demo`: a local burst cluster on real parts (Slurm
// 22.05, or 24.11/26.05 from a Debian root with BURST_SLURM, burst's
// binaries as Slurm runs them, the EC2 emulator with nodes
// booted by burst's bootstrap in network namespaces) running a short
// scripted scenario, with a live timeline and a cost table at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

func main() {
	bin := flag.String("bin", "", "directory with the burst binaries (make build)")
	keep := flag.Bool("keep", false, "keep the run directories for inspection")
	stay := flag.Bool("stay", false, "after the scenario keep the stack and the dashboard up until Ctrl-C (make demo KEEP=1)")
	idle := flag.Duration("idle-timeout", 10*time.Minute, "idle timeout of the comparison policy (ParallelCluster's default)")
	flag.Parse()
	if err := run(*bin, *keep, *stay, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type job struct {
	id, label string
	submitted time.Time
	state     string
}

func run(bin string, keep, stay bool, idleTimeout time.Duration) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the demo starts slurmctld, munged and network namespaces: run it as root (sudo make demo)")
	}
	if bin == "" {
		return fmt.Errorf("-bin is required (make demo passes it)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sv, err := harness.SelectedSlurm()
	if err != nil {
		return err
	}
	fmt.Printf("burst demo: starting real slurmctld (%s), burst-sizer and the EC2 emulator ...\n", sv)
	st, err := stack.Start(ctx, stack.Options{BinDir: bin, KeepDir: keep, Logger: quiet,
		Emulator: ec2emu.Options{BootDelay: 2 * time.Second, ShutdownDelay: time.Second, Logger: quiet},
		Configure: func(c *config.Config) {
			c.Classes[1].MaxNodes = 2 // a10g: a burst of short jobs shares two nodes
		}})
	if err != nil {
		return err
	}
	defer st.Stop()
	fmt.Printf("cluster %s: slurm.conf %s, burst.yaml %s\n  burst log %s\n", st.Cfg.Cluster.Name, st.Cluster.ConfPath(), st.CfgPath, st.LogPath())
	if st.Cfg.Slurm.API == "rest" {
		fmt.Printf("  burst talks to Slurm through slurmrestd at %s (JWT minted from %s)\n", st.Cfg.Slurm.Rest.URL, st.Cfg.Slurm.Rest.JWTKeyFile)
	} else {
		fmt.Printf("  burst talks to Slurm through its command-line tools (BURST_SLURM_API=rest: through slurmrestd)\n")
	}
	fmt.Println()
	t0 := time.Now()
	st.Events.Live(os.Stdout)
	fmt.Printf("%7s  %-10s %-18s %s\n", "time", "subject", "event", "detail")

	jobs := map[string]*job{}
	var order []string
	submit := func(label string, args ...string) error {
		id, err := st.Cluster.Sbatch(ctx, args...)
		if err != nil {
			return err
		}
		jobs[id] = &job{id: id, label: label, submitted: time.Now()}
		order = append(order, id)
		st.Events.Add("job "+id, "submitted", label)
		return nil
	}
	// 1. one GPU job with metadata: the sizer picks the class and offering
	if err := submit("1 GPU, 1B-param fine-tune", "--gres=gpu:1", "--account=demo",
		"--comment=burst: params=1B dataset=20GB workload=finetune checkpoint=10m", "--wrap", "sleep 6"); err != nil {
		return err
	}
	// 2. a two-node job: both nodes from one all-or-nothing launch
	if err := submit("2 nodes x 1 L4, srun", "-N2", "--gres=gpu:1", "--constraint=l4", "--account=demo",
		"--wrap", "srun hostname; sleep 4"); err != nil {
		return err
	}
	// 3. a burst of short jobs on a class of two nodes: finished nodes are
	// handed to waiting jobs (warm reuse) instead of being released
	for i := 1; i <= 4; i++ {
		if err := submit(fmt.Sprintf("short job %d/4 (a10g)", i), "--gres=gpu:1", "--constraint=a10g", "--account=demo",
			"--wrap", "sleep 3"); err != nil {
			return err
		}
	}
	// follow Slurm and burst's log from the start, in the background
	sl := slurm.NewScontrol(slurm.ScontrolOptions{Conf: st.Cluster.ConfPath(), BinDir: st.Cluster.ClientBin()})
	var mu sync.Mutex
	allDone := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range jobs {
			if j.state != "COMPLETED" && j.state != "FAILED" && j.state != "CANCELLED" {
				return false
			}
		}
		return true
	}
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		seenLog := 0
		for {
			seenLog = followLog(st, seenLog)
			if js, err := sl.Jobs(ctx); err == nil {
				mu.Lock()
				for _, j := range js {
					if jb := jobs[fmt.Sprint(j.ID)]; jb != nil && j.State != jb.state {
						jb.state = j.State
						detail := j.Nodes
						if j.State == "PENDING" {
							detail = j.Reason
						}
						st.Events.Add("job "+jb.id, strings.ToLower(j.State), detail)
					}
				}
				mu.Unlock()
			}
			select {
			case <-stopPoll:
				followLog(st, seenLog)
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	defer func() {
		select {
		case <-stopPoll:
		default:
			close(stopPoll)
		}
		<-polled
	}()
	// 4. the L4 spot pools run dry: the next L4 job falls back to on-demand.
	// That happens at 25 s, or later, once the first two (L4) jobs are done
	// and their instances terminated: a terminated instance gives its capacity back
	// to the pool, and how long jobs take depends on the Slurm version.
	l4Done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range order[:2] {
			if s := jobs[id].state; s != "COMPLETED" && s != "FAILED" && s != "CANCELLED" {
				return false
			}
		}
		for _, in := range st.Emu.Instances() {
			if strings.HasPrefix(in.InstanceType, "g6.") && in.State != "terminated" {
				return false
			}
		}
		return true
	}
	for wait := time.Now().Add(2 * time.Minute); time.Since(t0) < 25*time.Second || !l4Done() && time.Now().Before(wait); {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, typ := range []string{"g6.xlarge", "g6.2xlarge"} {
		for z := range st.Cfg.Network.Subnets {
			st.Emu.SetCapacity(typ, z, "spot", 0)
		}
	}
	st.Events.Add("ec2", "spot pools dry", "g6.* spot capacity set to 0 in every zone")
	mu.Lock()
	err = submit("1 L4 after spot ran dry", "--gres=gpu:1", "--constraint=l4", "--account=demo", "--wrap", "sleep 4")
	mu.Unlock()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		live := 0
		for _, in := range st.Emu.Instances() {
			if in.State == "pending" || in.State == "running" || in.State == "shutting-down" {
				live++
			}
		}
		if allDone() && live == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the scenario did not finish in 4 minutes (see %s)", st.LogPath())
		}
		time.Sleep(300 * time.Millisecond)
	}
	close(stopPoll)
	<-polled
	fmt.Printf("\nall %d jobs done and every instance released after %.0f s\n\n", len(jobs), time.Since(t0).Seconds())
	printCosts(st, idleTimeout)
	if stay {
		return stayUp(ctx, st, bin)
	}
	return nil
}

// stayUp keeps the stack (Slurm, the emulator, the sizer and its
// dashboard) running until Ctrl-C, and says how to log in.
func stayUp(ctx context.Context, st *stack.Stack, bin string) error {
	ui := st.Cfg.Sizer.URL + "/ui/"
	fmt.Printf(`
The stack stays up until Ctrl-C.
  dashboard   %s
  log in with the admin token:     cat %s
  or as account demo (read-only):  %s/burst-sizer --config %s token account demo
  the same figures as JSON:        curl -H "Authorization: Bearer $(cat %s)" %s/v1/money
  submit more jobs:                SLURM_CONF=%s sbatch --gres=gpu:1 --account=demo --wrap "sleep 30"
`, ui, st.Cfg.Sizer.TokenFile, bin, st.CfgPath, st.Cfg.Sizer.TokenFile, st.Cfg.Sizer.URL, st.Cluster.ConfPath())
	<-ctx.Done()
	fmt.Println("\nstopping the stack ...")
	return nil
}

// followLog turns burst's own log lines (sizing decisions, launches,
// releases) into timeline events.
func followLog(st *stack.Stack, from int) int {
	b, err := os.ReadFile(st.LogPath())
	if err != nil || len(b) <= from {
		return from
	}
	for _, line := range strings.Split(string(b[from:]), "\n") {
		switch {
		case strings.Contains(line, `"msg":"sized job"`):
			st.Events.Add("job "+field(line, "job"), "sized", field(line, "best")+" via "+field(line, "source"))
		case strings.Contains(line, `"msg":"instance"`) && strings.Contains(line, `"instance_id"`):
			st.Events.Add("job "+field(line, "job"), "launched", field(line, "node")+" "+field(line, "type")+" "+field(line, "capacity")+" in "+field(line, "zone"))
		case strings.Contains(line, `"msg":"handing nodes back"`):
			st.Events.Add(field(line, "nodes"), "handed back", field(line, "reason"))
		case strings.Contains(line, `"msg":"released at job end"`):
			st.Events.Add("job "+field(line, "job"), "released", field(line, "nodes"))
		case strings.Contains(line, `"msg":"keeping node warm for a waiting job"`):
			st.Events.Add(field(line, "node"), "kept warm", "for job "+field(line, "waiting_job"))
		}
	}
	return len(b)
}

// field extracts a JSON field's value from a log line without decoding it all.
func field(line, key string) string {
	i := strings.Index(line, `"`+key+`":`)
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+3:]
	if strings.HasPrefix(v, `"`) {
		v = v[1:]
		if j := strings.IndexByte(v, '"'); j >= 0 {
			return v[:j]
		}
	}
	if j := strings.IndexAny(v, ",}"); j >= 0 {
		return v[:j]
	}
	return v
}

func printCosts(st *stack.Stack, idleTimeout time.Duration) {
	cat := catalog.Default()
	stopped := map[string]time.Time{}
	for _, e := range st.Events.Events() {
		if e.What == "instance stopped" {
			stopped[strings.Fields(e.Detail)[0]] = e.At
		}
	}
	ins := st.Emu.Instances()
	sort.Slice(ins, func(i, j int) bool { return ins[i].LaunchTime.Before(ins[j].LaunchTime) })
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tinstance\ttype\tcapacity\tbilled s\tburst $\tidle-timeout $\t")
	var sec, cost, idleCost float64
	for _, in := range ins {
		t, _ := cat.Lookup(in.InstanceType)
		end, ok := stopped[in.ID]
		if !ok {
			end = time.Now()
		}
		ran := end.Sub(in.LaunchTime).Seconds()
		// what EC2 bills the instance (per second of each running segment,
		// 60 s minimum each: the emulator's own billing record)
		var s, c float64
		for _, l := range st.Emu.BillFor(in.ID) {
			s, c = s+float64(l.Seconds), c+l.USD
		}
		// the comparison: the same instance on demand, kept for the idle timeout after its work
		ic := t.OnDemandUSD * (max(ran, 60) + idleTimeout.Seconds()) / 3600
		sec, cost, idleCost = sec+s, cost+c, idleCost+ic
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.4f\t%.4f\t\n", ec2p.NodeOf(in.Tags), in.ID, in.InstanceType, in.Lifecycle, s, c, ic)
	}
	fmt.Fprintf(tw, "total\t\t\t\t%.0f\t%.4f\t%.4f\t\n", sec, cost, idleCost)
	tw.Flush()
	if idleCost > 0 {
		fmt.Printf("\nburst spent $%.4f for %d instances; an idle-timeout policy (on-demand, %s idle timeout) would have spent $%.4f: %.0f%% less.\n",
			cost, len(ins), idleTimeout, idleCost, 100*(1-cost/idleCost))
	}
	fmt.Printf("(burst: what EC2 bills, from the emulator's billing record; idle-timeout: us-east-1 on-demand prices from the embedded catalog; logs in %s)\n", filepath.Dir(st.LogPath()))
}
