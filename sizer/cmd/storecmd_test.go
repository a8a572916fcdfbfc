package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

// burst-sizer store migrate and store copy against a throwaway PostgreSQL:
// a used SQLite state directory copies with every table's rows counted.
func TestStoreMigrateAndCopy(t *testing.T) {
	srv := pgtest.Start(t)
	dir := t.TempDir()
	dsn := srv.NewDatabase(t)
	cfg := strings.ReplaceAll(string(config.DemoYAML), "/tmp/burst-demo", dir)
	cfg = strings.Replace(cfg, "  state_dir: "+dir+"/state\n", "  state_dir: "+dir+"/state\n  store:\n    driver: postgres\n    url: \""+dsn+"\"\n", 1)
	if !strings.Contains(cfg, "driver: postgres") {
		t.Fatal("the demo config has no sizer.state_dir line to put the store after")
	}
	p := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// a used SQLite store
	ctx := context.Background()
	src, err := store.Open(ctx, filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i-1", "i-2"} {
		if err := src.RecordInstance(ctx, store.Launch{Event: sizerapi.InstanceEvent{InstanceID: id, Node: "n-1", InstanceType: "g6.xlarge", Capacity: "spot", Time: time.Now(),
			Job: &sizerapi.Job{JobID: "3", User: "u", Account: "demo", JobName: "j", GPUsPerNode: 1, Nodes: 1}}, PriceUSD: 0.4}); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()

	var out, errb bytes.Buffer
	if code := runSizer(&out, &errb, "--config", p, "store", "migrate"); code != 0 || !regexp.MustCompile(`^postgres store .*: schema version ([1-9][0-9]*) \(newest ([1-9][0-9]*)\)\n$`).MatchString(out.String()) ||
		regexp.MustCompile(`version (\d+) \(newest (\d+)`).FindStringSubmatch(out.String())[1] != regexp.MustCompile(`version (\d+) \(newest (\d+)`).FindStringSubmatch(out.String())[2] {
		t.Fatalf("store migrate: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", p, "store", "copy"); code != 0 {
		t.Fatalf("store copy: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"TABLE", "instances  ", "jobs  "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("store copy output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "instances     2       2") && !strings.Contains(strings.Join(strings.Fields(out.String()), " "), "instances 2 2") {
		t.Errorf("store copy does not report 2 instances copied:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := runSizer(&out, &errb, "--config", p, "store", "copy"); code == 0 || !strings.Contains(errb.String(), "already has") {
		t.Errorf("a second copy into the used database: exit %d\n%s", code, errb.String())
	}
}
