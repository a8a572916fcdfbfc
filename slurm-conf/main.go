// Command burst-slurm-conf writes Slurm's configuration for burst from
// burst.yaml and checks an existing slurm.conf against it.
package main

import (
	"fmt"
	"os"

	"github.com/burst-hpc/burst/internal/slurmconf/cmd"
)

func main() {
	err := cmd.App(os.Stdout).Run(os.Args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "burst-slurm-conf:", err)
	}
	os.Exit(cmd.ExitCode(err))
}
