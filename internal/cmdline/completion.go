package cmdline

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// docsOut is where completion and man write (standard output; some apps'
// Writer is standard error, as Slurm's hooks log there).
var docsOut io.Writer = os.Stdout

// Shells are the shells `completion` writes a script for.
var Shells = []string{"bash", "zsh", "fish"}

// AddDocCommands gives app `completion SHELL` (a completion script for
// bash, zsh or fish) and a hidden `man` (its man page, section 1), both
// generated from app's own command and flag definitions; `make package`
// builds the packages' man pages and completions with them. Run calls it.
func AddDocCommands(app *cli.App) {
	for _, c := range app.Commands {
		if c.Name == "completion" || c.Name == "man" {
			return
		}
	}
	app.Commands = append(app.Commands, &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish), e.g. source <(" + app.Name + " completion bash)",
		ArgsUsage: "bash|zsh|fish",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return Usagef("completion needs one shell: %s", strings.Join(Shells, ", "))
			}
			s, err := Completion(app, c.Args().First())
			if err != nil {
				return err
			}
			_, err = io.WriteString(docsOut, s)
			return err
		},
	}, &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff, section 1)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return Usagef("unexpected argument %q: man takes none", c.Args().First())
			}
			s, err := c.App.ToManWithSection(1)
			if err != nil {
				return fmt.Errorf("writing the man page: %w", err)
			}
			_, err = io.WriteString(docsOut, s)
			return err
		},
	})
}

// Completion is app's completion script for shell (bash, zsh, fish).
func Completion(app *cli.App, shell string) (string, error) {
	switch shell {
	case "bash":
		return bashCompletion(app), nil
	case "zsh":
		return zshCompletion(app), nil
	case "fish":
		s, err := app.ToFishCompletion()
		if err != nil {
			return "", fmt.Errorf("writing the fish completion: %w", err)
		}
		return s, nil
	}
	return "", Usagef("completion: unknown shell %q; want one of %s", shell, strings.Join(Shells, ", "))
}

// node is one command of the tree: its path ("" for the program,
// "/token/init" for a subcommand) and the words that may follow it.
type node struct {
	path  string
	words []string
}

// tree flattens app's visible commands and flags into nodes, sorted by path.
func tree(app *cli.App) []node {
	var out []node
	var rec func(path string, cmds []*cli.Command, flags []cli.Flag)
	rec = func(path string, cmds []*cli.Command, flags []cli.Flag) {
		var w []string
		for _, c := range cmds {
			if !c.Hidden {
				w = append(w, c.Names()...)
			}
		}
		for _, f := range flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			for _, n := range f.Names() {
				if len(n) == 1 {
					w = append(w, "-"+n)
				} else {
					w = append(w, "--"+n)
				}
			}
		}
		if !slices.Contains(w, "--help") {
			w = append(w, "--help")
		}
		out = append(out, node{path: path, words: w})
		for _, c := range cmds {
			if !c.Hidden {
				for _, n := range c.Names() {
					rec(path+"/"+n, c.Subcommands, c.Flags)
				}
			}
		}
	}
	rec("", app.Commands, app.Flags)
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// funcName is a shell function name for program prog.
func funcName(prog string) string {
	return "_" + strings.NewReplacer("-", "_", ".", "_").Replace(prog)
}

// commandPaths is the shell case pattern of every path that has a
// subcommand word after it, quoted ("/token"|"/token/init").
func commandPaths(ns []node) string {
	var ps []string
	for _, n := range ns {
		if n.path != "" {
			ps = append(ps, `"`+n.path+`"`)
		}
	}
	if len(ps) == 0 {
		return `"/"` // no subcommands: a pattern nothing matches
	}
	return strings.Join(ps, "|")
}

func bashCompletion(app *cli.App) string {
	ns := tree(app)
	fn := funcName(app.Name)
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s, generated from its command definitions (%s completion bash)\n", app.Name, app.Name)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} path= w i words\n")
	b.WriteString("  for ((i = 1; i < COMP_CWORD; i++)); do\n    w=${COMP_WORDS[i]}\n")
	fmt.Fprintf(&b, "    case \"$path/$w\" in\n      %s) path=$path/$w ;;\n    esac\n  done\n", commandPaths(ns))
	b.WriteString("  case \"$path\" in\n")
	for _, n := range ns {
		fmt.Fprintf(&b, "    %q) words=%q ;;\n", n.path, strings.Join(n.words, " "))
	}
	b.WriteString("  esac\n")
	b.WriteString("  mapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n}\n")
	fmt.Fprintf(&b, "complete -o default -F %s %s\n", fn, app.Name)
	return b.String()
}

func zshCompletion(app *cli.App) string {
	ns := tree(app)
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s, generated from its command definitions (%s completion zsh)\n", app.Name, app.Name, app.Name)
	b.WriteString("local path_= w i\nlocal -a cands\n")
	b.WriteString("for ((i = 2; i < CURRENT; i++)); do\n  w=${words[i]}\n")
	fmt.Fprintf(&b, "  case \"$path_/$w\" in\n    %s) path_=$path_/$w ;;\n  esac\ndone\n", commandPaths(ns))
	b.WriteString("case \"$path_\" in\n")
	for _, n := range ns {
		fmt.Fprintf(&b, "  %q) cands=(%s) ;;\n", n.path, strings.Join(n.words, " "))
	}
	b.WriteString("esac\ncompadd -a cands || _files\n")
	return b.String()
}
