package clifilter

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestRenderGolden(t *testing.T) {
	cases := map[string]Options{
		"default": {SizerPath: "/usr/local/bin/burst-sizer", GlobalArgs: []string{"--config", "/etc/slurm/burst.yaml"}, Partitions: []string{"gpu", "gpu-big"}, DefaultPartition: "gpu"},
		"quoting": {SizerPath: "/opt/burst's bin/burst-sizer", GlobalArgs: []string{"--config", `/etc/"odd" $(dir)/burst.yaml`}, Partitions: []string{"cloud"}, Timeout: 4 * time.Second, TimeoutPath: "/bin/timeout"},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Render(o)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".lua.golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/clifilter -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("cli_filter.lua differs from %s; if intended, run go test ./internal/clifilter -update\n--- got ---\n%s", path, got)
			}
		})
	}
}

func TestRenderValidates(t *testing.T) {
	_, err := Render(Options{SizerPath: "burst-sizer", Partitions: []string{"gpu;rm"}, DefaultPartition: "cpu", TimeoutPath: "timeout"})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"must be absolute", "timeout path", "characters Slurm does not allow", "not a burst partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := Render(Options{SizerPath: "/x"}); err == nil || !strings.Contains(err.Error(), "no burst partitions") {
		t.Errorf("no partitions: %v", err)
	}
}

// TestShellQuoteIsInert runs hostile values through a real shell: each must
// come back as one unchanged argument, with nothing executed.
func TestShellQuoteIsInert(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	canary := filepath.Join(t.TempDir(), "pwned")
	for _, v := range []string{
		"plain", "it's", "'; touch " + canary + "; '", "$(touch " + canary + ")", "`touch " + canary + "`",
		"a\nb", `back\slash "dq"`, "--comment=burst: params=7B; touch " + canary, "*", "~root", "${HOME}", "'", "''", "",
	} {
		out, err := exec.Command(sh, "-c", "printf '%s\\0' "+ShellQuote(v)).Output()
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if string(out) != v+"\x00" {
			t.Errorf("%q came back as %q", v, out)
		}
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a quoted value was executed by the shell")
	}
}

// The Lua shquote must follow the same rule as ShellQuote.
func TestLuaQuotingMatchesGo(t *testing.T) {
	lua, err := Render(Options{SizerPath: "/x", Partitions: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(lua, []byte(`return "'" .. (string.gsub(s, "'", "'\\''")) .. "'"`)) {
		t.Error("Lua shquote does not use the '\\'' rule")
	}
	if got := LuaString("a\"b\\c\nd\x00é"); got != `"a\"b\\c\010d\000\195\169"` {
		t.Errorf("LuaString: %s", got)
	}
}
