package compose

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config/configtest"
)

func TestEnvOf(t *testing.T) {
	get := EnvOf([]string{"A=1", "B=x=y", "C=", "junk"})
	if get("A") != "1" || get("B") != "x=y" || get("C") != "" || get("junk") != "" || get("D") != "" {
		t.Fatal("EnvOf splits wrong")
	}
}

func TestLoadReadsTheGivenEnvironment(t *testing.T) {
	cfg := configtest.Demo(t)
	path := configtest.Write(t, cfg)
	env := EnvOf([]string{"BURST_CONFIG=" + path, "BURST_LOG_LEVEL=debug", "BURST_EC2_ENDPOINT=http://127.0.0.1:9"})
	got, err := Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != path || got.Log.Level != "debug" || got.Cluster.EC2Endpoint != "http://127.0.0.1:9" {
		t.Fatalf("Load: source %s level %s endpoint %s", got.Source, got.Log.Level, got.Cluster.EC2Endpoint)
	}
	if o := EC2Options(got); !o.StaticCredentials || o.Region != "us-east-1" || o.Endpoint != "http://127.0.0.1:9" {
		t.Fatalf("EC2Options %+v", o)
	}
	got.Cluster.EC2StaticCredentials = false
	if EC2Options(got).StaticCredentials {
		t.Fatal("an http:// endpoint alone must not mean dummy credentials")
	}
}

func TestSlurmConf(t *testing.T) {
	cfg := configtest.Demo(t)
	if got := SlurmConf(cfg, EnvOf(nil)); got != filepath.Join(cfg.Slurm.ConfDir, "slurm.conf") {
		t.Errorf("without SLURM_CONF: %s", got)
	}
	if got := SlurmConf(cfg, EnvOf([]string{"SLURM_CONF=/x/slurm.conf"})); got != "/x/slurm.conf" {
		t.Errorf("with SLURM_CONF: %s", got)
	}
}

func TestSizingClassesAndPolicy(t *testing.T) {
	cfg := configtest.Demo(t)
	cfg.Slurm.Partitions = append(cfg.Slurm.Partitions, cfg.Slurm.Partitions[0])
	cfg.Slurm.Partitions[0].Name, cfg.Slurm.Partitions[0].Classes = "a10g-only", []string{"a10g"}
	cl := SizingClasses(cfg, catalog.Default())
	if len(cl) != 2 || cl[0].Name != "l4" || cl[0].Partition != "gpu" || cl[1].Partition != "a10g-only" ||
		strings.Join(cl[1].InstanceTypes, ",") != "g5.xlarge,g5.2xlarge" || string(cl[1].Capacity) != "spot-then-on-demand" {
		t.Fatalf("classes %+v", cl)
	}
	if p := ClassPartitions(cfg); strings.Join(p["a10g"], ",") != "a10g-only,gpu" || strings.Join(p["l4"], ",") != "gpu" {
		t.Fatalf("partitions %v", p)
	}
	if _, err := Policy(cfg); err != nil {
		t.Fatal(err)
	}
}

func TestLoggers(t *testing.T) {
	var buf bytes.Buffer
	StderrLogger(&buf, "warn", "burst-x", false).Info("hidden")
	StderrLogger(&buf, "warn", "burst-x", false).Warn("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"prog":"burst-x"`) {
		t.Fatalf("level not honoured: %s", s)
	}
	buf.Reset()
	cfg := configtest.Demo(t)
	CommandLogger(&buf, cfg).Info("quiet at info")
	cfg.Log.Level = "debug"
	CommandLogger(&buf, cfg).Debug("loud at debug")
	if s := buf.String(); strings.Contains(s, "quiet") || !strings.Contains(s, "loud") {
		t.Fatalf("command logger: %s", s)
	}
}

// TestOpen: the stack of burst-resume and burst-suspend, with no sizer
// token (in-process ranking), logs to log.file at log.level.
func TestOpen(t *testing.T) {
	cfg := configtest.Demo(t)
	cfg.Log.Level = "warn"
	path := configtest.Write(t, cfg)
	st, err := Open(context.Background(), path, "burst-test", EnvOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.Sizer != nil || st.AdminToken != "" || st.Cloud == nil || st.Recorder == nil {
		t.Fatalf("stack %+v", st)
	}
	if _, err := st.Resumer(); err != nil {
		t.Fatal(err)
	}
	st.Log.Info("not at warn")
	st.Close()
	b, _ := os.ReadFile(cfg.Log.File)
	if !strings.Contains(string(b), "cannot read the sizer token") || strings.Contains(string(b), "not at warn") || !strings.Contains(string(b), `"prog":"burst-test"`) {
		t.Fatalf("log:\n%s", b)
	}
}
