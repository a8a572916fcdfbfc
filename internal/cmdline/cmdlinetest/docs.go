// Package cmdlinetest checks, for tests, that the command lines the README and
// docs show name subcommands and flags the programs have.
package cmdlinetest

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
)

// DocCommands finds the command lines of prog in Markdown text: the lines
// of ``` blocks and the `inline code` spans that start with prog (after an
// optional sudo or a path to it). Each is returned as its words, up to a
// shell operator.
func DocCommands(text, prog string) [][]string {
	var out [][]string
	take := func(s string) {
		for {
			i := strings.Index(s, prog)
			if i < 0 {
				return
			}
			// prog must start a word (not burst-sizer-filter, not foo/burst-sizer.go)
			before := ""
			if i > 0 {
				before = s[i-1 : i]
			}
			rest := s[i+len(prog):]
			s = rest
			if before != "" && before != " " && before != "/" && before != "(" && before != "$" {
				continue
			}
			if rest != "" && rest[0] != ' ' {
				continue
			}
			line := rest
			for _, op := range []string{"|", ";", "&&", ")", "`", " #", " >", " <", " 2>", "\\"} {
				if j := strings.Index(line, op); j >= 0 {
					line = line[:j]
				}
			}
			out = append(out, strings.Fields(line))
		}
	}
	inBlock := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			take(l)
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(l, -1) {
			take(m[1])
		}
	}
	return out
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// CheckDocCommand reports what in one documented command line app does not
// have: an unknown subcommand (where the command takes none of its own
// arguments) or an unknown flag.
func CheckDocCommand(app *cli.App, words []string) error {
	cmdline.AddDocCommands(app) // what Run adds to every program: completion, man
	flags := [][]cli.Flag{app.Flags, {cli.HelpFlag, cli.VersionFlag}}
	cmds := app.Commands
	path := app.Name
	takesArgs := app.Action != nil && app.ArgsUsage != ""
	atStart := true
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case strings.HasPrefix(w, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if name == "" || strings.ContainsAny(name, "<[{.*") {
				continue
			}
			f := findFlag(flags, name)
			if f == nil {
				return fmt.Errorf("%s: no flag --%s", path, name)
			}
			if _, isBool := f.(*cli.BoolFlag); !isBool && !hasValue {
				i++ // its value
			}
		default:
			if c := findCommand(cmds, w); c != nil {
				path += " " + c.Name
				flags = append(flags, c.Flags)
				cmds = c.Subcommands
				takesArgs = c.ArgsUsage != "" || c.SkipFlagParsing
				atStart = true
				continue
			}
			if atStart && len(cmds) > 0 && !takesArgs && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
				return fmt.Errorf("%s: no command %q", path, w)
			}
			atStart = false
		}
	}
	return nil
}

func findFlag(sets [][]cli.Flag, name string) cli.Flag {
	for _, fs := range sets {
		for _, f := range fs {
			if f == nil {
				continue
			}
			for _, n := range f.Names() {
				if n == name {
					return f
				}
			}
		}
	}
	return nil
}

func findCommand(cs []*cli.Command, name string) *cli.Command {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}
