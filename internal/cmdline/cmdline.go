// Package cmdline is what the five burst programs share on the command
// line, all built on urfave/cli/v2: the --config flag, accepted the same way
// before or after a subcommand; an environment variable for every flag; and
// the one rule that maps an error to an exit status.
//
// Exit statuses: 0 success; 1 a failure or a refusal; 2 invalid
// configuration or usage; 4 drift (burst-slurm-conf check: slurm.conf
// differs from what burst.yaml needs); an ExitCoder's own code
// (burst-sizer route's 3 "no class fits", burst-agent's 3 "no GPU driver").
package cmdline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/config"
)

// Exit statuses shared by every program.
const (
	ExitOK      = 0
	ExitFailure = 1
	// ExitUsage is a bad command line or an invalid burst.yaml.
	ExitUsage = 2
	// ExitDrift is burst-slurm-conf check's "slurm.conf differs".
	ExitDrift = 4
)

// ExitError is an error with its exit status; it implements cli.ExitCoder
// and keeps the error it wraps visible to errors.Is and errors.As.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode implements cli.ExitCoder.
func (e *ExitError) ExitCode() int { return e.Code }

// Exit returns err with exit status code.
func Exit(code int, err error) error { return &ExitError{Code: code, Err: err} }

// Usage marks err as a usage error (exit status 2).
func Usage(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// Usagef is Usage(fmt.Errorf(format, args...)).
func Usagef(format string, args ...any) error { return Usage(fmt.Errorf(format, args...)) }

// ExitCode maps err to the process exit status: nil 0, an ExitCoder its
// code, invalid configuration (config.Problems) 2, anything else 1.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if config.IsInvalid(err) {
		return ExitUsage
	}
	return ExitFailure
}

// Run runs app with args (args[0] is the program) and returns its exit
// status; it never calls os.Exit. A failure is printed on stderr as
// "<app>: <error>"; flag errors are usage errors (status 2).
func Run(ctx context.Context, app *cli.App, args []string, stderr io.Writer) int {
	if app.ErrWriter == nil {
		app.ErrWriter = stderr
	}
	app.ExitErrHandler = func(*cli.Context, error) {} // the exit status is ours to return
	AddDocCommands(app)
	onUsage := func(_ *cli.Context, err error, _ bool) error { return Usage(fmt.Errorf("%w (see --help)", err)) }
	app.OnUsageError = onUsage
	walk(app.Commands, func(c *cli.Command, _ []string) { c.OnUsageError = onUsage })
	if app.Action == nil && len(app.Commands) > 0 {
		app.Action = func(c *cli.Context) error {
			if c.NArg() > 0 {
				return Usagef("unknown command %q (see --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		}
	}
	err := app.RunContext(ctx, args)
	if err != nil && err.Error() != "" {
		fmt.Fprintf(stderr, "%s: %v\n", app.Name, err)
	}
	return ExitCode(err)
}

// ConfigEnv names burst.yaml when --config is not given.
const ConfigEnv = "BURST_CONFIG"

const configUsage = "burst.yaml (default: $BURST_CONFIG, burst.yaml beside $SLURM_CONF, then " + config.DefaultPath + ")"

// ConfigFlag is the program-wide --config flag (also -c, $BURST_CONFIG).
func ConfigFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{ConfigEnv}, TakesFile: true, Usage: configUsage}
}

// AcceptConfigEverywhere gives every subcommand of app its own --config, so
// that `prog --config X sub` and `prog sub --config X` mean the same; read
// the value with ConfigPath. The subcommands' copies have no environment
// variable of their own: $BURST_CONFIG fills the program-wide flag, which a
// --config given anywhere on the command line overrides.
func AcceptConfigEverywhere(app *cli.App) {
	walk(app.Commands, func(c *cli.Command, _ []string) {
		if c.SkipFlagParsing || hasFlag(c.Flags, "config") {
			return
		}
		c.Flags = append([]cli.Flag{&cli.StringFlag{Name: "config", Aliases: []string{"c"}, TakesFile: true,
			Usage: configUsage + "; also before the subcommand"}}, c.Flags...)
	})
}

// ConfigPath is the --config value given nearest to the command that runs
// (after the subcommand, else before it, else $BURST_CONFIG); "" when none.
func ConfigPath(c *cli.Context) string {
	for _, x := range c.Lineage() {
		if x == nil {
			continue
		}
		if v := x.String("config"); v != "" {
			return v
		}
	}
	return ""
}

// SetEnvVars gives every flag of app that has no environment variable one:
// BURST_<COMMAND PATH>_<FLAG>, upper case with dashes as underscores
// (burst-sizer route --gres reads $BURST_ROUTE_GRES; a program-wide flag
// --out reads $BURST_OUT). Subcommand copies of --config are left alone
// (see AcceptConfigEverywhere).
func SetEnvVars(app *cli.App) {
	for _, f := range app.Flags {
		setEnv(f, nil)
	}
	walk(app.Commands, func(c *cli.Command, path []string) {
		for _, f := range c.Flags {
			if flagName(f) == "config" {
				continue
			}
			setEnv(f, path)
		}
	})
}

func walk(cmds []*cli.Command, f func(c *cli.Command, path []string)) {
	var rec func(cs []*cli.Command, path []string)
	rec = func(cs []*cli.Command, path []string) {
		for _, c := range cs {
			p := append(append([]string(nil), path...), c.Name)
			f(c, p)
			rec(c.Subcommands, p)
		}
	}
	rec(cmds, nil)
}

func hasFlag(fs []cli.Flag, name string) bool {
	for _, f := range fs {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func flagName(f cli.Flag) string { return f.Names()[0] }

func envField(f cli.Flag) reflect.Value {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("EnvVars")
}

func setEnv(f cli.Flag, path []string) {
	ev := envField(f)
	if !ev.IsValid() || ev.Len() > 0 {
		return
	}
	parts := append([]string{"BURST"}, path...)
	parts = append(parts, flagName(f))
	name := strings.ToUpper(strings.NewReplacer("-", "_").Replace(strings.Join(parts, "_")))
	ev.Set(reflect.ValueOf([]string{name}))
}
