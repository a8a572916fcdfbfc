package cmdline

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func docsApp() *cli.App {
	return &cli.App{Name: "burst-demo", Usage: "a demo", Flags: []cli.Flag{ConfigFlag()},
		Commands: []*cli.Command{
			{Name: "token", Usage: "tokens", Subcommands: []*cli.Command{
				{Name: "init", Usage: "new token", Flags: []cli.Flag{&cli.BoolFlag{Name: "force"}}, Action: func(*cli.Context) error { return nil }},
			}},
			{Name: "secret", Hidden: true, Action: func(*cli.Context) error { return nil }},
		}}
}

func runDocs(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	docsOut = &out
	defer func() { docsOut = os.Stdout }()
	code := Run(context.Background(), docsApp(), append([]string{"burst-demo"}, args...), &errb)
	return out.String() + errb.String(), code
}

// TestCompletionBash sources the generated script in bash and asks it for
// completions at several points of the command line.
func TestCompletionBash(t *testing.T) {
	script, code := runDocs(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("code %d: %s", code, script)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatal("bash not found: the bash completion cannot be checked (BURST_REQUIRE_TOOLS=1)")
		}
		t.Skip("SKIPPING: no bash to load the completion in; BURST_REQUIRE_TOOLS=1 makes this a failure")
	}
	p := filepath.Join(t.TempDir(), "c.bash")
	os.WriteFile(p, []byte(script), 0o644)
	for line, want := range map[string]string{
		"burst-demo ":                  "--config --help -c -h completion h help token",
		"burst-demo to":                "token",
		"burst-demo --config x.yaml t": "token",
		"burst-demo token ":            "--help init",
		"burst-demo token init --f":    "--force",
	} {
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := "source " + p + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _burst_demo; printf '%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '"
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("completing %q: %q (%v), want %q", line, out, err, want)
		}
	}
	if strings.Contains(script, "secret") {
		t.Error("a hidden command is offered")
	}
}

func TestCompletionOtherShellsAndMan(t *testing.T) {
	zsh, code := runDocs(t, "completion", "zsh")
	if code != 0 || !strings.HasPrefix(zsh, "#compdef burst-demo\n") || !strings.Contains(zsh, `"/token") cands=(init --help)`) {
		t.Errorf("zsh (code %d):\n%s", code, zsh)
	}
	fish, code := runDocs(t, "completion", "fish")
	if code != 0 || !strings.Contains(fish, "complete -c burst-demo") || !strings.Contains(fish, "token") {
		t.Errorf("fish (code %d):\n%s", code, fish)
	}
	man, code := runDocs(t, "man")
	if code != 0 || !strings.Contains(man, ".TH burst-demo 1") || !strings.Contains(man, "token") {
		t.Errorf("man (code %d):\n%s", code, man)
	}
	if out, code := runDocs(t, "completion", "tcsh"); code != ExitUsage || !strings.Contains(out, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: code %d %q; want usage error naming the shell", code, out)
	}
	if out, code := runDocs(t, "completion"); code != ExitUsage || !strings.Contains(out, "bash, zsh, fish") {
		t.Errorf("completion without a shell: code %d %q", code, out)
	}
}
