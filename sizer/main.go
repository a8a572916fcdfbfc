// Command burst-sizer sizes burst jobs: `route` at submission (called by
// cli_filter.lua), `serve` (the daemon burst-resume and burst-agent talk
// to), `report` and `token`.
package main

import (
	"fmt"
	"os"

	"github.com/burst-hpc/burst/sizer/cmd"
)

func main() {
	err := cmd.App(os.Stdout, os.Stderr).Run(os.Args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "burst-sizer:", err)
	}
	os.Exit(cmd.ExitCode(err))
}
