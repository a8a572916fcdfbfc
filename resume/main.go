// Command burst-resume is Slurm's ResumeProgram (argument: the nodes to
// power up) and PrologSlurmctld (SLURM_SCRIPT_CONTEXT=prolog_slurmctld: wait
// until the job's nodes registered): it launches a cloud instance for each
// node Slurm powers up.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/slurm"
)

const prog = "burst-resume"

// contextProlog is Slurm's SLURM_SCRIPT_CONTEXT for PrologSlurmctld.
const contextProlog = "prolog_slurmctld"

func main() { os.Exit(run(os.Args, os.Environ(), os.Stdout, os.Stderr)) }

// run is burst-resume given its arguments, its environment (KEY=value),
// standard output (help and version: Slurm discards it when it runs the
// hook, an admin reads it) and standard error; it returns the exit status.
func run(args, env []string, stdout, stderr io.Writer) int {
	getenv := compose.EnvOf(env)
	// Slurm deletes SLURM_RESUME_FILE 10 s after starting us: read it first.
	rf := readResumeFile(getenv("SLURM_RESUME_FILE"))
	return cmdline.Run(context.Background(), newApp(getenv, rf, stdout), args, stderr)
}

func newApp(getenv compose.Getenv, rf resumeFile, stdout io.Writer) *cli.App {
	app := &cli.App{
		Name:            prog,
		Usage:           "launch cloud instances for the nodes Slurm powers up (ResumeProgram, PrologSlurmctld)",
		ArgsUsage:       "<hostlist>",
		HideHelpCommand: true,
		Writer:          stdout,
		Flags:           []cli.Flag{cmdline.ConfigFlag()},
		Action: func(c *cli.Context) error {
			st, err := compose.Open(c.Context, cmdline.ConfigPath(c), prog, getenv)
			if err != nil {
				return err
			}
			defer st.Close()
			if getenv("SLURM_SCRIPT_CONTEXT") == contextProlog {
				prolog(c.Context, st, getenv)
				return nil // never fail a job from the prolog: Slurm's own timers handle dead nodes
			}
			if c.NArg() != 1 {
				st.Log.Error("usage: burst-resume <hostlist>", "args", c.Args().Slice())
				return cmdline.Usagef("usage: %s [--config FILE] <hostlist>", prog)
			}
			return resume(c.Context, st, c.Args().First(), rf)
		},
	}
	cmdline.AddVersion(app)
	cmdline.SetEnvVars(app)
	return app
}

// prolog waits (PrologSlurmctld) until the job's nodes registered, so Slurm
// starts the batch job at once instead of on its next 30 s pass.
// A job that reached its nodes without a resume (a warm node) is admitted
// here first (budgets, limits); one refused is requeued held. The job's
// start on burst nodes is recorded for the spend ledger.
func prolog(ctx context.Context, st *compose.Stack, getenv compose.Getenv) {
	job, nodes := getenv("SLURM_JOB_ID"), getenv("SLURM_JOB_NODELIST")
	t0 := time.Now()
	var jobID uint32
	fmt.Sscan(job, &jobID)
	hooks := st.Hooks()
	gpus := 0
	if hooks.Admit.Configured() {
		// the job, and what admission counts: the jobs on burst nodes and
		// its entries' (not the queue)
		jobs, err := hooks.Admit.View(ctx, st.Slurm, false, jobID)
		if err != nil {
			st.Log.Warn("prolog: listing jobs for admission control; the job's resume decided", "err", err)
		} else if !hooks.Prolog(ctx, jobID, nodes, jobs) {
			return
		}
		for _, j := range jobs {
			if j.ID == jobID {
				gpus = int(j.GPUsPerNode())
			}
		}
	}
	ready, err := lifecycle.WaitNodes(ctx, st.Slurm, jobID, nodes, st.Cfg.Slurm.ResumeTimeout.Duration, 200*time.Millisecond, st.Log)
	st.Log.Info("prolog", "job", job, "nodes", nodes, "ready", ready, "waited_s", time.Since(t0).Seconds(), "err", err)
	hooks.RunStarted(ctx, jobID, nodes, getenv("SLURM_JOB_ACCOUNT"), getenv("SLURM_JOB_USER"), gpus)
	if st.Sizer != nil {
		// every job that starts on burst nodes enters the learning history
		// (warm-reused nodes' jobs too: no launch announced them)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lifecycle.RecordStart(rctx, st.Cfg, st.Slurm, st.Sizer, jobID, nodes, time.Now(), st.Log)
		cancel()
	}
}

// resume is ResumeProgram: launch the nodes of hostlist, sized from the
// jobs of the resume file.
func resume(ctx context.Context, st *compose.Stack, hostlist string, rf resumeFile) error {
	if rf.err != nil {
		st.Log.Warn("unusable SLURM_RESUME_FILE; resuming nodes without job information", "err", rf.err)
	}
	if rf.raw != nil {
		keepCopy(st.Cfg.Sizer.StateDir, rf.raw, st.Log)
	}
	ctx, cancel := context.WithTimeout(ctx, max(st.Cfg.Slurm.ResumeTimeout.Duration-lifecycle.TellSlurmTimeout, 30*time.Second))
	defer cancel()
	r, err := st.Resumer()
	if err != nil {
		st.Log.Error("building the sizing policy", "err", err)
		return err
	}
	if _, err := r.Resume(ctx, hostlist, rf.parsed); err != nil {
		st.Log.Error("resume failed", "nodes", hostlist, "err", err)
		return err
	}
	// the launch intents (and anything the sizer missed) reach it now
	if n, ferr := st.Recorder.Flush(ctx); n > 0 || ferr != nil {
		st.Log.Info("replayed journaled events", "sent", n, "err", ferr)
	}
	return nil
}

// resumeFile is SLURM_RESUME_FILE as read at start: parsed is nil when
// there was none or it was unusable (err says why); raw is what was read.
type resumeFile struct {
	parsed *slurm.ResumeFile
	raw    []byte
	err    error
}

func readResumeFile(path string) resumeFile {
	if path == "" {
		return resumeFile{}
	}
	rf, raw, err := slurm.ReadResumeFile(path)
	if err != nil {
		return resumeFile{raw: raw, err: err}
	}
	return resumeFile{parsed: &rf, raw: raw}
}
