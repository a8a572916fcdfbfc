package cmdlinetest

import (
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"
)

// MissingEnvVars lists the flags of app (as "command --flag") that read no
// environment variable, leaving out a subcommand's --config copy and
// --help: every program's test checks that cmdline.SetEnvVars reached all
// of its flags.
func MissingEnvVars(app *cli.App) []string {
	var out []string
	check := func(fs []cli.Flag, where string, sub bool) {
		for _, f := range fs {
			n := f.Names()[0]
			if n == "help" || (sub && n == "config") {
				continue
			}
			if len(EnvVars(f)) == 0 {
				out = append(out, strings.TrimSpace(where+" --"+n))
			}
		}
	}
	check(app.Flags, "", false)
	var walk func(cs []*cli.Command, path []string)
	walk = func(cs []*cli.Command, path []string) {
		for _, c := range cs {
			p := append(append([]string(nil), path...), c.Name)
			check(c.Flags, strings.Join(p, " "), true)
			walk(c.Subcommands, p)
		}
	}
	walk(app.Commands, nil)
	return out
}

// EnvVars is the environment variables flag f reads (its EnvVars field;
// none for a flag type without one).
func EnvVars(f cli.Flag) []string {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	if ev := v.Elem().FieldByName("EnvVars"); ev.IsValid() {
		return ev.Interface().([]string)
	}
	return nil
}
