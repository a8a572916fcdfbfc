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
				Name: "init", Usage: "write a new admin token (0600) and the route credential beside it (0644)", ArgsUsage: "[TOKEN_FILE]",
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
					fmt.Fprintf(c.App.Writer, "wrote %s (admin, 0600) and %s (route, 0644)\n", path, rp)
					return nil
				},
			},
			{
				Name: "node", Usage: "print a node's credential (for its user data)", ArgsUsage: "NODE",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cmdline.Usagef("usage: burst-sizer token node NODE")
					}
					path, err := tokenFile(c)
					if err != nil {
						return err
					}
					tok, err := auth.LoadToken(path)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(c.App.Writer, auth.NodeToken(tok, c.Args().First()))
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
						return cmdline.Usagef("burst-sizer token account: %v", err)
					}
					_, err = fmt.Fprintln(c.App.Writer, at)
					return err
				},
			},
		},
	}
}
