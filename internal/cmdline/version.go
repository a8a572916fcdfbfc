package cmdline

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/version"
)

// AddVersion gives app a --version flag and a version subcommand, both
// printing version.String on app's Writer. Call it before SetEnvVars.
//
// burst-resume and burst-suspend take a hostlist argument: `burst-resume
// version` runs the subcommand, never a resume of a node named "version".
// No burst node can be named so: burst-slurm-conf names every node
// <class>-<n> (a class name, a dash, an index), and Slurm passes those names.
func AddVersion(app *cli.App) {
	app.Version = version.Version
	app.HideVersion = false
	print := func(c *cli.Context) {
		w := c.App.Writer
		if w == nil {
			w = c.App.ErrWriter
		}
		fmt.Fprintln(w, version.String(c.App.Name))
	}
	cli.VersionPrinter = print
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and exit"}
	app.Commands = append(app.Commands, &cli.Command{
		Name:  "version",
		Usage: "print the version (release, commit, Go version)",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return Usagef("version takes no arguments, got %q", c.Args().First())
			}
			print(c)
			return nil
		},
	})
}
