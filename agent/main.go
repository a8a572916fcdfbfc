// Command burst-agent runs on every burst node: it reports what each job
// really uses of its GPUs to the sizer and makes spot interruptions safe
// (checkpoint signal, requeue, node hand-back). See agent/interrupt for the
// checkpoint protocol jobs follow. `burst-agent bootstrap` joins the node to
// Slurm at boot, and burst-agent run as Slurm's TaskProlog
// (SLURM_SCRIPT_CONTEXT=prolog_task) gives every task its checkpoint
// directory.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

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
	if getenv("SLURM_SCRIPT_CONTEXT") == "prolog_task" {
		taskProlog(stdout, getenv)
		return 0
	}
	return cmdline.Run(ctx, newApp(stdout, stderr), args, stderr)
}
