package cmdlinetest

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
)

// A flag without an environment variable is named with its command; after
// cmdline.SetEnvVars none is, and a subcommand's --config copy is left out.
func TestMissingEnvVars(t *testing.T) {
	app := func() *cli.App {
		return &cli.App{Name: "bare", Flags: []cli.Flag{&cli.IntFlag{Name: "n"}},
			Commands: []*cli.Command{{Name: "sub", Subcommands: []*cli.Command{{Name: "leaf", Flags: []cli.Flag{&cli.BoolFlag{Name: "dry-run"}}}}}}}
	}
	if m := MissingEnvVars(app()); !slices.Equal(m, []string{"--n", "sub leaf --dry-run"}) {
		t.Errorf("MissingEnvVars(bare) = %q", m)
	}
	set := app()
	cmdline.AcceptConfigEverywhere(set)
	cmdline.SetEnvVars(set)
	if m := MissingEnvVars(set); len(m) != 0 {
		t.Errorf("after SetEnvVars, missing %q", m)
	}
	if got := EnvVars(set.Flags[0]); !slices.Equal(got, []string{"BURST_N"}) {
		t.Errorf("--n reads %q, want BURST_N", got)
	}
}
