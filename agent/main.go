// Command burst-agent runs on every burst node: it reports what each job
// really uses of its GPUs to the sizer and makes spot interruptions safe
// (checkpoint signal, requeue, node hand-back). See agent/spotwatch for the
// checkpoint protocol jobs follow. `burst-agent bootstrap` joins the node to
// Slurm at boot; burst-agent run as Slurm's Prolog (SLURM_SCRIPT_CONTEXT=
// prolog_slurmd, as root) makes each job's checkpoint directory, and as its
// TaskProlog (prolog_task) tells every task where it is.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
)

// commands: add a subcommand with one line here.
func commands() []*cli.Command {
	return []*cli.Command{
		runCommand(),
		gpuCheckCommand(),
		bootstrapCommand(),
		execCleanCommand(),
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "burst-agent",
		Usage:     "burst node agent: GPU utilisation reports and spot interruption handling",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands:  commands(),
	}
	cmdline.AddVersion(app)
	cmdline.SetEnvVars(app)
	return app
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is burst-agent given its arguments, environment (KEY=value), standard
// output and standard error; it returns the exit status.
func run(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	getenv := compose.EnvOf(env)
	switch getenv("SLURM_SCRIPT_CONTEXT") {
	case "prolog_task":
		taskProlog(stdout, getenv)
		return 0
	case "prolog_slurmd":
		return prolog(stderr, getenv, time.Now())
	}
	return cmdline.Run(ctx, newApp(stdout, stderr), args, stderr)
}
