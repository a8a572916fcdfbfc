package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	out, _, err := runCLIErr(t, stdin, args...)
	return out, err
}

// runCLIErr is runCLI with standard error apart.
func runCLIErr(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &cli.App{Name: "burst-sizer", Writer: &out, ErrWriter: &errb, Commands: []*cli.Command{Command()},
		ExitErrHandler: func(*cli.Context, error) {}} // as cmdline.Run: the exit status is the caller's
	if stdin != "" {
		f := filepath.Join(t.TempDir(), "stdin")
		if err := os.WriteFile(f, []byte(stdin), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--in", f)
	}
	err := app.Run(append([]string{"burst-sizer"}, args...))
	return out.String(), errb.String(), err
}

func writeTrace(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommandJSONAndSVG(t *testing.T) {
	tr := writeTrace(t, "0,3600,1\n1800,3600,1\n4000,1800,1\n7200,7200,16\n")
	svg := filepath.Join(t.TempDir(), "c.svg")
	out, err := runCLI(t, "", "simulate", "--trace", tr, "--json", "--svg", svg, "--boot-sigma", "0", "--spot-dry", "0")
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if res.Jobs != 4 || len(res.Policies) != 3 || res.Policies[2].Name != PolicyBurst || res.Assumptions.BootSigma != 0 {
		t.Errorf("result %+v", res)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<polyline")) {
		t.Errorf("svg not written: %v", err)
	}
}

func TestCommandSweep(t *testing.T) {
	tr := writeTrace(t, "0,36000,1\n600,36000,8\n")
	out, stderr, err := runCLIErr(t, "", "simulate", "--trace", tr, "--sweep", "--sweep-boot", "2m", "--sweep-interruptions", "advisor,50", "--sweep-checkpoint", "30m,none")
	if err != nil {
		t.Fatal(err)
	}
	// progress on stderr: one idle-timeout run and four burst runs
	if !strings.Contains(stderr, "simulate --sweep: 5 of 5 runs done") {
		t.Errorf("no progress on stderr: %q", stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("sweep printed %d lines, want header + 4:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[3], "50/node-h") || !strings.Contains(lines[4], "none") {
		t.Errorf("sweep rows out of order:\n%s", out)
	}
	// warm knobs: "off" once, then each cap x quantile
	out, err = runCLI(t, "", "simulate", "--trace", tr, "--sweep", "--sweep-boot", "2m", "--sweep-interruptions", "advisor", "--sweep-checkpoint", "30m",
		"--sweep-warm-cap", "off,0,50", "--sweep-warm-quantile", "0.9,0.99", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sw struct{ Sweep []SweepRow }
	if err := json.Unmarshal([]byte(out), &sw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sw.Sweep {
		got = append(got, fmt.Sprintf("%g/%g", r.WarmCapUSDPerDay, r.WarmQuantile))
	}
	if strings.Join(got, " ") != "-1/0 0/0.9 0/0.99 50/0.9 50/0.99" {
		t.Errorf("warm sweep rows %v", got)
	}
}

func TestCommandErrors(t *testing.T) {
	tr := writeTrace(t, "0,60,1\n")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"simulate"}, []string{"needs --trace FILE"}},
		{[]string{"simulate", "--trace", filepath.Join(t.TempDir(), "none.csv")}, []string{"opening trace"}},
		{[]string{"simulate", "--trace", tr, "--checkpoint", "5x", "--interruptions", "often", "--zones", "0", "--max-spot-interruptions", "0"},
			[]string{`checkpoint "5x"`, `interruptions "often"`, "--zones 0", "--max-spot-interruptions 0"}},
		{[]string{"simulate", "--trace", tr, "--policies", "static,cheapest"}, []string{`policy "cheapest" is unknown`}},
		{[]string{"simulate", "--trace", tr, "--warm-quantile", "1", "--warm-profile-weight", "2", "--warm-cap", "-1", "--warm-half-life", "0s", "--sched-delay", "-1s"},
			[]string{"--warm-quantile 1", "--warm-profile-weight 2", "--warm-cap -1", "--warm-half-life 0s", "--sched-delay -1s"}},
		{[]string{"simulate", "--trace", tr, "--sweep", "--sweep-warm-cap", "lots", "--sweep-warm-quantile", "1.5"}, []string{`--sweep-warm-cap "lots"`, `--sweep-warm-quantile "1.5"`}},
		{[]string{"simulate", "--trace", tr, "--interruptions", "bamboo:/nonexistent"}, []string{"opening the bamboo trace"}},
		{[]string{"simulate", "--trace", writeTrace(t, "0,60,1\n0,x,1\n")}, []string{"line 2", `duration "x"`}},
	} {
		_, err := runCLI(t, "", c.args...)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not mention %q", c.args, err, w)
			}
		}
	}
}

func TestCommandConvertSacct(t *testing.T) {
	in := "JobID|Submit|Start|End|AllocTRES|Comment\n1|2026-03-01T07:00:00|2026-03-01T07:01:00|2026-03-01T09:01:00|gres/gpu=2|burst: params=7B\n"
	out, err := runCLI(t, in, "simulate", "convert-sacct")
	if err != nil {
		t.Fatal(err)
	}
	if want := "submit,duration,gpus,gpu_model,metadata\n2026-03-01T07:00:00Z,7200,2,,burst: params=7B\n"; out != want {
		t.Errorf("converted %q, want %q", out, want)
	}
	if _, err := runCLI(t, "JobID|Submit\n", "simulate", "convert-sacct"); err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Errorf("bad header: %v", err)
	}
}

func TestParseInterruptionsBamboo(t *testing.T) {
	p := writeTrace(t, "0,add,a\n0,add,b\n3600000,remove,a\n7200000,remove,b\n")
	im, err := ParseInterruptions("bamboo:"+p, openFile)
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := im.(PoissonRate); !ok || pr.PerNodeHour != 2.0/3 {
		t.Errorf("model %#v, want PoissonRate 2/3", im)
	}
}

// TestCommandUsageExits2: a bad command line is a usage error (exit 2);
// a trace that cannot be opened is a failure (1).
func TestCommandUsageExits2(t *testing.T) {
	tr := writeTrace(t, "0,60,1\n")
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"simulate"}, cmdline.ExitUsage},
		{[]string{"simulate", "--trace", tr, "--format", "bogus"}, cmdline.ExitUsage},
		{[]string{"simulate", "--trace", tr, "--zones", "0"}, cmdline.ExitUsage},
		{[]string{"simulate", "--trace", tr, "stray"}, cmdline.ExitUsage},
		{[]string{"simulate", "--trace", filepath.Join(t.TempDir(), "none.csv")}, cmdline.ExitFailure},
	} {
		_, err := runCLI(t, "", c.args...)
		if got := cmdline.ExitCode(err); got != c.want {
			t.Errorf("%v: exit %d (%v), want %d", c.args, got, err, c.want)
		}
	}
}
