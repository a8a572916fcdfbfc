package cmdline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/config"
)

func TestExitCode(t *testing.T) {
	base := errors.New("boom")
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{base, 1},
		{config.Problems{{Path: "cluster.name", Msg: "required"}}, 2},
		{fmt.Errorf("loading: %w", config.Problems{{Msg: "x"}}), 2},
		{Usagef("usage: x"), 2},
		{Exit(3, base), 3},
		{fmt.Errorf("wrapped: %w", Exit(3, base)), 3},
		{cli.Exit("gone", 4), 4},
	} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if !errors.Is(Exit(3, base), base) {
		t.Error("Exit hides the error it wraps")
	}
}

// toy is a program with a subcommand that reports which --config it saw.
func toy(seen *string) *cli.App {
	app := &cli.App{Name: "toy", Flags: []cli.Flag{ConfigFlag(), &cli.StringFlag{Name: "out"}},
		Commands: []*cli.Command{{Name: "sub", Subcommands: []*cli.Command{{Name: "leaf",
			Flags:  []cli.Flag{&cli.BoolFlag{Name: "dry-run"}},
			Action: func(c *cli.Context) error { *seen = ConfigPath(c); return nil }}}}}}
	AcceptConfigEverywhere(app)
	SetEnvVars(app)
	return app
}

func TestConfigBeforeOrAfterTheSubcommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--config", "a.yaml", "sub", "leaf"}, "", "a.yaml"},
		{[]string{"-c", "a.yaml", "sub", "leaf"}, "", "a.yaml"},
		{[]string{"sub", "leaf", "--config", "b.yaml"}, "", "b.yaml"},
		{[]string{"sub", "--config", "b.yaml", "leaf"}, "", "b.yaml"},
		{[]string{"--config", "a.yaml", "sub", "leaf", "--config", "b.yaml"}, "", "b.yaml"},
		{[]string{"sub", "leaf"}, "e.yaml", "e.yaml"},
		{[]string{"--config", "a.yaml", "sub", "leaf"}, "e.yaml", "a.yaml"},
		{[]string{"sub", "leaf", "--config", "b.yaml"}, "e.yaml", "b.yaml"},
		{[]string{"sub", "leaf"}, "", ""},
	} {
		t.Run(strings.Join(c.args, " ")+" env="+c.env, func(t *testing.T) {
			t.Setenv(ConfigEnv, c.env)
			var seen string
			var stderr strings.Builder
			if code := Run(context.Background(), toy(&seen), append([]string{"toy"}, c.args...), &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if seen != c.want {
				t.Fatalf("config %q, want %q", seen, c.want)
			}
		})
	}
}

func TestRunMapsErrors(t *testing.T) {
	var seen string
	for _, c := range []struct {
		args []string
		want int
		msg  string
	}{
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"sub", "leaf", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{}, 0, ""},
	} {
		var stderr strings.Builder
		app := toy(&seen)
		app.Writer = &strings.Builder{}
		if code := Run(context.Background(), app, append([]string{"toy"}, c.args...), &stderr); code != c.want || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.want, c.msg)
		}
	}
	app := &cli.App{Name: "toy", Action: func(*cli.Context) error { return Exit(3, errors.New("no class fits")) }}
	var stderr strings.Builder
	if code := Run(context.Background(), app, []string{"toy"}, &stderr); code != 3 || stderr.String() != "toy: no class fits\n" {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestSetEnvVars(t *testing.T) {
	var seen string
	app := toy(&seen)
	got := map[string][]string{}
	for _, f := range app.Flags {
		got[f.Names()[0]] = envField(f).Interface().([]string)
	}
	leaf := app.Commands[0].Subcommands[0]
	for _, f := range leaf.Flags {
		got["leaf "+f.Names()[0]] = envField(f).Interface().([]string)
	}
	for k, want := range map[string]string{"config": "BURST_CONFIG", "out": "BURST_OUT", "leaf dry-run": "BURST_SUB_LEAF_DRY_RUN"} {
		if len(got[k]) != 1 || got[k][0] != want {
			t.Errorf("%s reads %v, want %s", k, got[k], want)
		}
	}
	if len(got["leaf config"]) != 0 {
		t.Errorf("a subcommand's --config reads %v: it would override a --config given before the subcommand", got["leaf config"])
	}
}
