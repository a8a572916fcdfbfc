// Command burst-suspend is Slurm's SuspendProgram, ResumeFailProgram and
// EpilogSlurmctld: it releases nodes the moment their job ends and
// terminates their instances.
package main

import (
	"os"

	"github.com/burst-hpc/burst/internal/lifecycle"
)

func main() { os.Exit(lifecycle.MainSuspend(os.Args, os.Stderr)) }
