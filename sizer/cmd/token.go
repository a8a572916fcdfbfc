package cmd

import (
	"fmt"
	"os"
	"time"

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

// DefaultAccountValidity and MaxAccountValidity bound `token account
// --valid-for`: account credentials expire (90 days unless asked).
const (
	DefaultAccountValidity = 90 * 24 * time.Hour
	MaxAccountValidity     = 366 * 24 * time.Hour
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "manage sizer credentials",
		Subcommands: []*cli.Command{
			{
				Name: "init", Usage: "write a new admin token (0600), the route credential (.route, 0644) and the read-only one (.read, 0600) beside it", ArgsUsage: "[TOKEN_FILE]",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "replace an existing token"}},
				Action: tokenInit,
			},
			{
				Name: "read-only", Usage: "print the read-only credential (metrics, budgets, usage report) for a scraper or dashboard",
				Action: tokenReadOnly,
			},
			{
				Name: "account", Usage: "print a Slurm account's read-only credential (its dashboard and read-only API: that account's figures only); it expires, and --rotate revokes the account's earlier ones", ArgsUsage: "ACCOUNT",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "valid-for", Value: DefaultAccountValidity, Usage: "how long the credential works (1h to 8784h, a leap year)"},
					&cli.BoolFlag{Name: "rotate", Usage: "revoke every earlier credential of the account (<token_file>.accounts), then print a new one"},
				},
				Action: tokenAccount,
			},
		},
	}
}

// tokenFile is the token file: init's argument, else sizer.token_file.
func tokenFile(c *cli.Context) (string, error) {
	if p := c.Args().First(); p != "" && c.Command.Name == "init" {
		return p, nil
	}
	st, err := loadSettings(c)
	if err != nil {
		return "", err
	}
	return st.cfg.Sizer.TokenFile, nil
}

// loadTokenFile reads the admin token from the token file.
func loadTokenFile(c *cli.Context) (path, tok string, err error) {
	if path, err = tokenFile(c); err != nil {
		return "", "", err
	}
	tok, err = auth.LoadToken(path)
	return path, tok, err
}

// tokenInit writes a new admin token and the credentials derived from it.
func tokenInit(c *cli.Context) error {
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
}

// tokenReadOnly prints the read-only credential.
func tokenReadOnly(c *cli.Context) error {
	if c.NArg() != 0 {
		return cmdline.Usagef("usage: burst-sizer token read-only")
	}
	_, tok, err := loadTokenFile(c)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.App.Writer, auth.ReadOnlyToken(tok))
	return err
}

// tokenAccount prints an account's read-only credential, rotating first
// with --rotate.
func tokenAccount(c *cli.Context) error {
	if c.NArg() != 1 {
		return cmdline.Usagef("usage: burst-sizer token account [--valid-for 2160h] [--rotate] ACCOUNT")
	}
	account := c.Args().First()
	if err := auth.ValidAccount(account); err != nil {
		return cmdline.Usagef("token account %q: %v", account, err) // cmdline.Run prefixes the program
	}
	valid := c.Duration("valid-for")
	if valid < time.Hour || valid > MaxAccountValidity {
		return cmdline.Usagef("token account --valid-for %s: want 1h to %s", valid, MaxAccountValidity)
	}
	path, tok, err := loadTokenFile(c)
	if err != nil {
		return err
	}
	rf := &auth.RotationFile{Path: path + auth.RotationsSuffix}
	gen := rf.Generation(account)
	if err := rf.Err(); err != nil {
		return err
	}
	if c.Bool("rotate") {
		if gen, err = auth.Rotate(path, account); err != nil {
			return fmt.Errorf("rotating account %s's credentials: %w", account, err)
		}
		fmt.Fprintf(c.App.ErrWriter, "rotated account %s's credentials to generation %d: every earlier one is refused from now on\n", account, gen)
	}
	expires := time.Now().Add(valid).Truncate(time.Second)
	at, err := auth.AccountToken(tok, account, expires, gen)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "account %s's credential, valid until %s\n", account, expires.UTC().Format(time.RFC3339))
	_, err = fmt.Fprintln(c.App.Writer, at)
	return err
}
