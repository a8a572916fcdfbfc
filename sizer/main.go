// Command burst-sizer sizes burst jobs: `route` at submission (called by
// cli_filter.lua), `serve` (the daemon burst-resume and burst-agent talk
// to), `report`, `token`, `reconcile` and `simulate`.
package main

import (
	"context"
	"os"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/sizer/cmd"
)

func main() {
	os.Exit(cmdline.Run(context.Background(), cmd.App(os.Stdout, os.Stderr), os.Args, os.Stderr))
}
