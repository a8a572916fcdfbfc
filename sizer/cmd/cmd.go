// Package cmd is the burst-sizer command line: route (submission-time
// sizing, used by cli_filter.lua), serve (the daemon), report, token
// management, reconcile and simulate. main only runs App through
// internal/cmdline (one exit-code rule for every burst program).
package cmd

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/sizer/simulate"
)

// App builds the command line (run it with cmdline.Run).
func App(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "burst-sizer",
		Usage:     "size burst jobs, rank offerings, ingest GPU reports, keep budgets",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags:     []cli.Flag{cmdline.ConfigFlag()},
		Commands:  []*cli.Command{routeCommand(), serveCommand(), reportCommand(), tokenCommand(), tlsCommand(), reconcileCommand(), spendCommand(), ledgerCommand(), storeCommand(), simulate.Command(), doctorCommand()},
	}
	cmdline.AddVersion(app)
	cmdline.AcceptConfigEverywhere(app)
	cmdline.SetEnvVars(app)
	return app
}
