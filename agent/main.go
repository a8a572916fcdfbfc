// Command burst-agent runs on every burst node: it reports what each job
// really uses of its GPUs to the sizer and makes spot interruptions safe
// (checkpoint signal, requeue, node hand-back). See agent/interrupt for the
// checkpoint protocol jobs follow.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

// commands: add a subcommand with one line here.
var commands = []*cli.Command{
	runCommand(),
	gpuCheckCommand(),
	bootstrapCommand(),
	execCleanCommand(),
}

func newApp() *cli.App {
	return &cli.App{
		Name:     "burst-agent",
		Usage:    "burst node agent: GPU utilisation reports and spot interruption handling",
		Commands: commands,
	}
}

func main() {
	if os.Getenv("SLURM_SCRIPT_CONTEXT") == "prolog_task" {
		taskProlog(os.Stdout, os.Getenv)
		return
	}
	app := newApp()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "burst-agent:", err)
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}
