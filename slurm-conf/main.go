// Command burst-slurm-conf writes Slurm's configuration for burst from
// burst.yaml (the slurm.conf include, gres.conf, cli_filter.lua), checks an
// existing slurm.conf against it, and prints the head node's IAM policy.
package main

import (
	"context"
	"io"
	"os"

	"github.com/burst-hpc/burst/internal/cmdline"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run is burst-slurm-conf given its arguments, standard output and standard
// error; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cmdline.Run(context.Background(), App(stdout), args, stderr)
}
