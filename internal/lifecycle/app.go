package lifecycle

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/logging"
	"github.com/burst-hpc/burst/internal/slurm"
	sizercmd "github.com/burst-hpc/burst/sizer/cmd"
)

// Slurm's SLURM_SCRIPT_CONTEXT values for the controller hooks.
const (
	contextProlog = "prolog_slurmctld"
	contextEpilog = "epilog_slurmctld"
)

// exitCode maps an error to a process exit status.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case config.IsInvalid(err):
		return 2
	default:
		return 1
	}
}

// MainResume is burst-resume: ResumeProgram (argument: the nodes) or, when
// Slurm runs it as PrologSlurmctld, the wait for the job's nodes.
func MainResume(args []string, stderr io.Writer) int {
	// Slurm deletes SLURM_RESUME_FILE 10 s after starting us: read it first.
	var rf *slurm.ResumeFile
	var rfErr error
	var rfRaw []byte
	if p := os.Getenv("SLURM_RESUME_FILE"); p != "" {
		rfRaw, rfErr = os.ReadFile(p)
		if rfErr == nil {
			var parsed slurm.ResumeFile
			if parsed, rfErr = slurm.ParseResumeFile(rfRaw); rfErr == nil {
				rf = &parsed
			}
		}
	}
	fs := flag.NewFlagSet("burst-resume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "burst.yaml (default $BURST_CONFIG, burst.yaml beside $SLURM_CONF, or "+config.DefaultPath+")")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	ctx := context.Background()
	st, err := Open(ctx, *cfgPath, "burst-resume")
	if err != nil {
		startupError("burst-resume", err, stderr)
		return exitCode(err)
	}
	defer st.Close()
	if os.Getenv("SLURM_SCRIPT_CONTEXT") == contextProlog {
		job, nodes := os.Getenv("SLURM_JOB_ID"), os.Getenv("SLURM_JOB_NODELIST")
		t0 := time.Now()
		var jobID uint32
		fmt.Sscan(job, &jobID)
		ready, err := WaitNodes(ctx, st.Slurm, jobID, nodes, st.Cfg.Slurm.ResumeTimeout.Duration, 200*time.Millisecond, st.Log)
		st.Log.Info("prolog", "job", job, "nodes", nodes, "ready", ready, "waited_s", time.Since(t0).Seconds(), "err", err)
		return 0 // never fail a job from the prolog: Slurm's own timers handle dead nodes
	}
	if fs.NArg() != 1 {
		st.Log.Error("usage: burst-resume <hostlist>", "args", args)
		fmt.Fprintln(stderr, "usage: burst-resume [--config FILE] <hostlist>")
		return 2
	}
	if rfErr != nil {
		st.Log.Warn("unusable SLURM_RESUME_FILE; resuming nodes without job information", "err", rfErr)
	}
	if rfRaw != nil {
		keepCopy(st, rfRaw)
	}
	ctx, cancel := context.WithTimeout(ctx, max(st.Cfg.Slurm.ResumeTimeout.Duration-10*time.Second, 30*time.Second))
	defer cancel()
	// only resume ranks: suspend, prolog and epilog never build the policy
	local, err := sizercmd.PolicyFromConfig(st.Cfg)
	if err != nil {
		st.Log.Error("building the sizing policy", "err", err)
		return exitCode(err)
	}
	r := &Resumer{Cfg: st.Cfg, Slurm: st.Slurm, Cloud: st.Cloud, Recorder: st.Recorder, Log: st.Log, UserData: st.UserDataFor,
		Breaker: breaker.New(breaker.Options{Dir: st.Cfg.Sizer.StateDir, Logger: st.Log}),
		Ranker:  &FallbackRanker{Sizer: st.Sizer, Local: local, Timeout: st.Cfg.Sizer.Timeout.Duration, Log: st.Log}}
	if _, err := r.Resume(ctx, fs.Arg(0), rf); err != nil {
		st.Log.Error("resume failed", "nodes", fs.Arg(0), "err", err)
		return 1
	}
	return 0
}

// keepResumeFiles is how many resume-file copies the state directory keeps.
const keepResumeFiles = 200

// keepCopy saves the resume file in the state directory for debugging
// (Slurm removes its own copy), keeping the newest keepResumeFiles.
func keepCopy(st *Stack, raw []byte) {
	dir := filepath.Join(st.Cfg.Sizer.StateDir, "resume-files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		st.Log.Warn("keeping a copy of the resume file", "err", err)
		return
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.json", time.Now().UTC().Format("20060102T150405.000"), os.Getpid()))
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		st.Log.Warn("keeping a copy of the resume file", "err", err)
	}
	// names sort by time: drop the oldest beyond the limit
	if old, err := filepath.Glob(filepath.Join(dir, "*.json")); err == nil && len(old) > keepResumeFiles {
		sort.Strings(old)
		for _, f := range old[:len(old)-keepResumeFiles] {
			os.Remove(f)
		}
	}
}

// MainSuspend is burst-suspend: SuspendProgram and ResumeFailProgram
// (argument: the nodes), EpilogSlurmctld (event-driven release), and
// `burst-suspend linger` (the warm-reuse timer it starts).
func MainSuspend(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("burst-suspend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "burst.yaml (default $BURST_CONFIG, burst.yaml beside $SLURM_CONF, or "+config.DefaultPath+")")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	ctx := context.Background()
	st, err := Open(ctx, *cfgPath, "burst-suspend")
	if err != nil {
		startupError("burst-suspend", err, stderr)
		return exitCode(err)
	}
	defer st.Close()
	if fs.NArg() >= 1 && fs.Arg(0) == "linger" {
		return linger(ctx, st, fs.Args()[1:], stderr)
	}
	if os.Getenv("SLURM_SCRIPT_CONTEXT") == contextEpilog {
		var job uint32
		fmt.Sscan(os.Getenv("SLURM_JOB_ID"), &job)
		rel := &Releaser{Cfg: st.Cfg, Slurm: st.Slurm, Log: st.Log, Linger: func(nodes []string, until time.Time, waiting []uint32) error {
			return startLinger(st.Cfg.Source, nodes, until, waiting)
		}}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, _, err := rel.Release(ctx, job, os.Getenv("SLURM_JOB_NODELIST")); err != nil {
			st.Log.Error("release at job end", "job", job, "err", err)
		}
		return 0 // an epilog failure would drain the nodes; SuspendTime remains the safety net
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: burst-suspend [--config FILE] <hostlist> | linger --until TIME --nodes HOSTLIST")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, max(st.Cfg.Slurm.SuspendTimeout.Duration, 30*time.Second))
	defer cancel()
	s := &Suspender{Cfg: st.Cfg, Cloud: st.Cloud, Recorder: st.Recorder, Log: st.Log}
	_, err = s.Suspend(ctx, fs.Arg(0))
	if n, ferr := st.Recorder.Flush(ctx); n > 0 || ferr != nil {
		st.Log.Info("replayed journaled instance events", "sent", n, "err", ferr)
	}
	if err != nil {
		st.Log.Error("suspend", "nodes", fs.Arg(0), "err", err)
		return 1
	}
	return 0
}

func linger(ctx context.Context, st *Stack, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("linger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	until := fs.String("until", "", "RFC 3339 time the warm-reuse window ends")
	nodes := fs.String("nodes", "", "hostlist of the warm nodes")
	poke := fs.String("poke", "", "comma-separated ids of the jobs waiting for the nodes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	t, err := time.Parse(time.RFC3339Nano, *until)
	ns, herr := hostlist.Expand(*nodes)
	if err != nil || herr != nil || len(ns) == 0 {
		fmt.Fprintln(stderr, "usage: burst-suspend linger --until RFC3339 --nodes HOSTLIST")
		return 2
	}
	var waiting []uint32
	for _, f := range strings.Split(*poke, ",") {
		var id uint32
		if _, err := fmt.Sscan(f, &id); err == nil && id > 0 {
			waiting = append(waiting, id)
		}
	}
	if len(waiting) > 0 {
		Poke(ctx, st.Slurm, ns, waiting, st.Log)
	}
	time.Sleep(time.Until(t))
	if _, err := LingerOnce(ctx, st.Slurm, ns, st.Log); err != nil {
		st.Log.Error("warm-reuse window", "err", err)
		return 1
	}
	return 0
}

// startLinger starts `burst-suspend linger` detached (own session, empty
// signal mask), so the epilog returns at once.
func startLinger(cfgPath string, nodes []string, until time.Time, waiting []uint32) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding burst-suspend: %w", err)
	}
	hl, err := hostlist.Compress(nodes)
	if err != nil {
		hl = strings.Join(nodes, ",")
	}
	ids := make([]string, len(waiting))
	for i, j := range waiting {
		ids[i] = fmt.Sprint(j)
	}
	cmd := exec.Command(self, "--config", cfgPath, "linger", "--until", until.UTC().Format(time.RFC3339Nano), "--nodes", hl, "--poke", strings.Join(ids, ","))
	// not the epilog's SLURM_* environment: the timer is not an epilog
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SLURM_SCRIPT_CONTEXT=") && !strings.HasPrefix(e, "SLURM_JOB_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive the epilog's process group
	if err := slurm.StartUnblocked(cmd); err != nil {
		return fmt.Errorf("starting the warm-reuse timer: %w", err)
	}
	return cmd.Process.Release()
}

// startupError reports a failure to start (typically a broken burst.yaml)
// on stderr and in the default log file: Slurm discards the output of its
// hooks, and without a configuration the configured log is unknown.
func startupError(prog string, err error, stderr io.Writer) {
	fmt.Fprintln(stderr, prog+":", err)
	log, closeLog := logging.Open(config.Default().Log.File, "info", prog)
	defer closeLog()
	log.Error("cannot start", "err", err, "args", os.Args, "slurm_conf", os.Getenv("SLURM_CONF"))
}
