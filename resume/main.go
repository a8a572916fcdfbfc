// Command burst-resume is Slurm's ResumeProgram (and PrologSlurmctld): it
// launches cloud instances for the nodes Slurm powers up.
package main

import (
	"os"

	"github.com/burst-hpc/burst/internal/lifecycle"
)

func main() { os.Exit(lifecycle.MainResume(os.Args, os.Stderr)) }
