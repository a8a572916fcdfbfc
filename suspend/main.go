// Command burst-suspend is Slurm's SuspendProgram and ResumeFailProgram
// (argument: the nodes to power down) and EpilogSlurmctld
// (SLURM_SCRIPT_CONTEXT=epilog_slurmctld: release the job's nodes the moment
// it ends, or keep one warm for a waiting job); `burst-suspend linger` is the
// warm-reuse timer the epilog starts.
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

const prog = "burst-suspend"

// contextEpilog is Slurm's SLURM_SCRIPT_CONTEXT for EpilogSlurmctld.
const contextEpilog = "epilog_slurmctld"

func main() { os.Exit(run(os.Args, os.Environ(), os.Stdout, os.Stderr)) }

// run is burst-suspend given its arguments, its environment (KEY=value),
// standard output (help and version: Slurm discards it when it runs the
// hook, an admin reads it) and standard error; it returns the exit status.
func run(args, env []string, stdout, stderr io.Writer) int {
	return cmdline.Run(context.Background(), newApp(env, stdout), args, stderr)
}

func newApp(env []string, stdout io.Writer) *cli.App {
	getenv := compose.EnvOf(env)
	open := func(c *cli.Context) (*compose.Stack, error) {
		return compose.Open(c.Context, cmdline.ConfigPath(c), prog, getenv)
	}
	app := &cli.App{
		Name:            prog,
		Usage:           "release nodes and terminate their instances (SuspendProgram, ResumeFailProgram, EpilogSlurmctld)",
		ArgsUsage:       "<hostlist>",
		HideHelpCommand: true,
		Writer:          stdout,
		Flags:           []cli.Flag{cmdline.ConfigFlag()},
		Action: func(c *cli.Context) error {
			st, err := open(c)
			if err != nil {
				return err
			}
			defer st.Close()
			if getenv("SLURM_SCRIPT_CONTEXT") == contextEpilog {
				epilog(c.Context, st, getenv, env)
				return nil // an epilog failure would drain the nodes; SuspendTime remains the safety net
			}
			if c.NArg() != 1 {
				return cmdline.Usagef("usage: %s [--config FILE] <hostlist> | linger --until TIME --nodes HOSTLIST", prog)
			}
			return suspend(c.Context, st, c.Args().First())
		},
		Commands: []*cli.Command{lingerCommand(open)},
	}
	cmdline.AddVersion(app)
	cmdline.AcceptConfigEverywhere(app)
	cmdline.SetEnvVars(app)
	return app
}

// epilog releases the ended job's nodes at once (EpilogSlurmctld), or keeps
// one warm for a waiting job that fits and starts the warm-reuse timer.
func epilog(ctx context.Context, st *compose.Stack, getenv compose.Getenv, env []string) {
	var job uint32
	fmt.Sscan(getenv("SLURM_JOB_ID"), &job)
	rel := st.Releaser(func(nodes []string, until time.Time, waiting []uint32) error {
		return startLinger(st.Cfg.Source, env, nodes, until, waiting)
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// the spend ledger learns the job's end; the held jobs that fit now
	// are released before the node's warm-reuse decision, so one of them
	// may take it
	jobs, err := func() ([]slurm.Job, error) {
		if h := st.Hooks(); h.Admit != nil && h.Admit.Configured() {
			// admission control releases the held jobs that fit: the job,
			// the jobs on burst nodes and the admissions' jobs, held ones
			// too (admit.View; not the queue)
			return h.Admit.View(ctx, st.Slurm, true, job)
		}
		return st.Slurm.Jobs(ctx, job) // the ended job alone, however long the queue
	}()
	if err != nil {
		st.Log.Warn("epilog: listing jobs; the job's end is recorded at the epilog's time", "err", err)
		st.Hooks().Epilog(ctx, job, getenv("SLURM_JOB_NODELIST"), nil)
	} else {
		st.Hooks().Epilog(ctx, job, getenv("SLURM_JOB_NODELIST"), jobs)
	}
	if _, _, err := rel.Release(ctx, job, getenv("SLURM_JOB_NODELIST")); err != nil {
		st.Log.Error("release at job end", "job", job, "err", err)
	}
	if st.Sizer != nil {
		// how the job ended, and whether it ran out of GPU memory: its next
		// run is sized up
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lifecycle.RecordEnd(rctx, st.Cfg, st.Slurm, st.Sizer, job, getenv("SLURM_JOB_NODELIST"), getenv("SLURM_JOB_EXIT_CODE2"), time.Now(), st.Log)
		cancel()
	}
}

// suspend is SuspendProgram and ResumeFailProgram: terminate the nodes'
// instances, then replay any journaled instance events to the sizer.
func suspend(ctx context.Context, st *compose.Stack, hostlist string) error {
	ctx, cancel := context.WithTimeout(ctx, max(st.Cfg.Slurm.SuspendTimeout.Duration, 30*time.Second))
	defer cancel()
	_, err := st.Suspender().Suspend(ctx, hostlist)
	if n, ferr := st.Recorder.Flush(ctx); n > 0 || ferr != nil {
		st.Log.Info("replayed journaled instance events", "sent", n, "err", ferr)
	}
	if err != nil {
		st.Log.Error("suspend", "nodes", hostlist, "err", err)
		return err
	}
	return nil
}
