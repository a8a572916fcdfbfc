package cmd

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/cmdline"
)

// RouteTokenSuffix: the route credential lives beside the admin token file,
// at <token_file>.route, readable by every user.
const RouteTokenSuffix = ".route"

// ReadOnlyTokenSuffix: the read-only credential (metrics, budgets, usage
// report) lives at <token_file>.read, 0600: give it to the scraper's user.
const ReadOnlyTokenSuffix = ".read"

func tokenCommand() *cli.Command {
	tokenFile := func(c *cli.Context) (string, error) {
		if p := c.Args().First(); p != "" && c.Command.Name == "init" {
			return p, nil
		}
		st, err := loadSettings(c)
		if err != nil {
			return "", err
		}
		return st.cfg.Sizer.TokenFile, nil
	}
	return &cli.Command{
		Name:  "token",
		Usage: "manage sizer credentials",
		Subcommands: []*cli.Command{
			{
				Name: "init", Usage: "write a new admin token (0600), the route credential (.route, 0644) and the read-only one (.read, 0600) beside it", ArgsUsage: "[TOKEN_FILE]",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "replace an existing token"}},
				Action: func(c *cli.Context) error {
					path, err := tokenFile(c)
					if err != nil {
						return err
					}
					tok, err := auth.WriteNew(path, c.Bool("force"))
					if err != nil {
						return err
					}
					rp := path + RouteTokenSuffix
					if err := os.WriteFile(rp, []byte(auth.RouteToken(tok)+"\n"), 0o644); err != nil {
						return fmt.Errorf("writing route credential: %w", err)
					}
					if err := os.Chmod(rp, 0o644); err != nil {
						return fmt.Errorf("writing route credential: %w", err)
					}
					ro := path + ReadOnlyTokenSuffix
					if err := os.WriteFile(ro, []byte(auth.ReadOnlyToken(tok)+"\n"), 0o600); err != nil {
						return fmt.Errorf("writing read-only credential: %w", err)
					}
					if err := os.Chmod(ro, 0o600); err != nil {
						return fmt.Errorf("writing read-only credential: %w", err)
					}
					fmt.Fprintf(c.App.Writer, "wrote %s (admin, 0600), %s (route, 0644) and %s (read-only, 0600)\n", path, rp, ro)
					return nil
				},
			},
			{
				Name: "read-only", Usage: "print the read-only credential (metrics, budgets, usage report) for a scraper or dashboard",
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return cmdline.Usagef("usage: burst-sizer token read-only")
					}
					path, err := tokenFile(c)
					if err != nil {
						return err
					}
					tok, err := auth.LoadToken(path)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(c.App.Writer, auth.ReadOnlyToken(tok))
					return err
				},
			},
			{
				Name: "account", Usage: "print a Slurm account's read-only credential (its dashboard and read-only API: that account's figures only)", ArgsUsage: "ACCOUNT",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cmdline.Usagef("usage: burst-sizer token account ACCOUNT")
					}
					path, err := tokenFile(c)
					if err != nil {
						return err
					}
					tok, err := auth.LoadToken(path)
					if err != nil {
						return err
					}
					at, err := auth.AccountToken(tok, c.Args().First())
					if err != nil {
						return cmdline.Usagef("token account %q: %v", c.Args().First(), err) // cmdline.Run prefixes the program
					}
					_, err = fmt.Fprintln(c.App.Writer, at)
					return err
				},
			},
		},
	}
}
