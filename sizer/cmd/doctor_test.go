package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/cmdline"
)

// TestDoctorInvalidConfig: a burst.yaml that does not load is the one
// FAIL line (and the JSON report with --json), exit 2 as every program's
// invalid configuration.
func TestDoctorInvalidConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "burst.yaml")
	os.WriteFile(p, []byte("cluster: {name: x, colour: red}\n"), 0o600)
	var out, errb bytes.Buffer
	if code := runSizer(&out, &errb, "--config", p, "doctor"); code != cmdline.ExitUsage || !strings.HasPrefix(out.String(), "FAIL config: ") || !strings.Contains(out.String(), "cluster.colour") {
		t.Errorf("doctor on an invalid burst.yaml: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	runSizer(&out, &errb, "--config", p, "doctor", "--json")
	var rep struct {
		Checks   []map[string]string `json:"checks"`
		Failures int                 `json:"failures"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Failures != 1 || rep.Checks[0]["check"] != "config" {
		t.Errorf("doctor --json on an invalid burst.yaml: %v %s", err, out.String())
	}
}
