package config

import (
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

func TestGPUHealthConfig(t *testing.T) {
	base := "cluster:\n  name: t\n  region: us-east-1\nclasses:\n  - name: a\n    gpu_model: a10g\n    gpus_per_node: 1\n    max_nodes: 1\n    instance_types: [g5.xlarge]\n" +
		"network:\n  subnets:\n    us-east-1a: subnet-1\nimage:\n  ami: ami-1\ngpu_health:\n  "
	cfg, err := Parse([]byte(base+"xid:\n    \"13\": replace\n    \"79\": ignore\n  events:\n    clock_slowdown: note\n  slowdown_after: 10m\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// the skeleton lacks other sections; gpu_health itself is fine
	if err := cfg.Validate(); err != nil && strings.Contains(err.Error(), "gpu_health") {
		t.Fatal(err)
	}
	o := cfg.GPUHealth.Overrides()
	if o.Xid[13] != gpuhealth.Replace || o.Xid[79] != gpuhealth.Ignore || o.Kinds[gpuhealth.KindSlowdown] != gpuhealth.Note {
		t.Errorf("overrides %+v", o)
	}
	// every bad entry is reported, each with its path
	cfg, err = Parse([]byte(base+"xid:\n    \"abc\": replace\n    \"48\": drain\n  events:\n    melted: note\n  interval: 5m\n"), "t.yaml")
	if err == nil {
		err = cfg.Validate()
	}
	for _, want := range []string{"gpu_health.xid.abc", "gpu_health.xid.48", `unknown action "drain"`, "gpu_health.events.melted", "gpu_health.interval", "at most 1m"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %s", err, want)
		}
	}
	if _, err := Parse([]byte(base+"xids: {}\n"), "t.yaml"); err == nil || !strings.Contains(err.Error(), "xids") {
		t.Errorf("unknown key: %v", err)
	}
}
