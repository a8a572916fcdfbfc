package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
)

func TestExampleIsValid(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "examples", "burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Classes) != 5 || cfg.Cluster.Name != "ml-prod" {
		t.Fatalf("unexpected config: %+v", cfg.Cluster)
	}
	cl, ok := cfg.ClassOfNode("a10gx4-8")
	if !ok || cl.Name != "a10gx4" {
		t.Fatalf("ClassOfNode(a10gx4-8) = %v %v", cl, ok)
	}
	if b := cfg.Classes[4].Reservations.CapacityBlocks; len(b) != 1 || b[0].ID != "cr-0fedcba9876543210" || b[0].PriceUSD != 1519.10 {
		t.Fatalf("the example's Capacity Block: %+v", b)
	}
	if _, ok := cfg.ClassOfNode("a10gx4-9"); ok {
		t.Fatal("a10gx4-9 is beyond max_nodes")
	}
	if got := cfg.Classes[0].Zones; len(got) != 3 {
		t.Fatalf("zones default to every subnet zone, got %v", got)
	}
	if got := cfg.Classes[1].Candidates(catalog.Default()); len(got) == 0 || got[0].Name != "g5.xlarge" {
		t.Fatalf("any a10g x1 candidates: %v", got)
	}
}

func TestDemoIsValid(t *testing.T) {
	cfg, err := Parse(DemoYAML, "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

const good = `
cluster: {name: t, region: us-east-1}
slurm:
  controller: 10.0.0.1
  partitions: [{name: gpu, default: true}]
classes:
  - name: a10g
    gpu_model: a10g
    gpus_per_node: 1
    max_nodes: 4
    instance_types: [g5.xlarge]
    capacity: spot
network:
  subnets: {us-east-1a: subnet-1}
image: {ami: ami-1}
`

func TestMinimalValid(t *testing.T) {
	cfg, err := Parse([]byte(good), "burst.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Slurm.ResumeTimeout.Minutes() != 10 || cfg.Sizer.StateDir != "/var/lib/burst" {
		t.Fatal("defaults not applied")
	}
	if w := cfg.Warm; w.Enabled || w.Quantile != 0.95 || w.ProfileWeight != 0.5 || w.Interval.Minutes() != 1 || w.LeadTime.Minutes() != 2 || cfg.Classes[0].WarmUSDPerDay != 0 {
		t.Fatalf("warm defaults: %+v", w)
	}
	if got := cfg.Classes[0].SpotAllocationStrategy; got != "price-capacity-optimized" {
		t.Errorf("spot_allocation_strategy defaults to %q, want price-capacity-optimized", got)
	}
}

// TestProblems checks that each malformed input gets exactly the expected
// problems, each with path and line.
func TestProblems(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // "line:path:substring"
	}{
		{"unknown key", strings.Replace(good, "max_nodes: 4", "max_nodes: 4\n    maxnodes: 5", 1),
			[]string{`11:classes[0].maxnodes:unknown key "maxnodes"`}},
		{"unknown top-level key with suggestion", good + "budget: []\n", []string{`16:budget:did you mean "budgets"`}},
		{"bad type", strings.Replace(good, "max_nodes: 4", "max_nodes: lots", 1),
			[]string{"10:classes[0].max_nodes:wrong type"}},
		{"negative max nodes", strings.Replace(good, "max_nodes: 4", "max_nodes: -3", 1),
			[]string{"10:classes[0].max_nodes:at least 1, got -3"}},
		{"missing subnet", strings.Replace(good, "subnets: {us-east-1a: subnet-1}", "subnets: {}", 1),
			[]string{"7:classes[0].zones:no subnet for class a10g"}},
		{"zone without subnet", strings.Replace(good, "capacity: spot", "capacity: spot\n    zones: [us-east-1b]", 1),
			[]string{`13:classes[0].zones[0]:no subnet for zone "us-east-1b"`}},
		{"budget without account", good + "budgets:\n  - monthly_usd: 100\n", []string{"17:budgets[0].account:budget without an account"}},
		{"budget on_unknown", good + "budgets:\n  - account: nlp\n    monthly_usd: 100\n    on_unknown: maybe\n", []string{`19:budgets[0].on_unknown:"maybe": want hold`}},
		{"limits", good + "limits:\n  - max_gpus: 2\n  - account: nlp\n  - account: nlp\n    max_gpus: -1\n  - user: \"bad name\"\n    max_nodes: 1\n  - account: nlp\n    max_gpus: 3\n",
			[]string{"17:limits[0]:needs an account, a user, or both", "18:limits[1]:limits nothing", "19:limits[2]:a second limit", "20:limits[2].max_gpus:must not be negative",
				`21:limits[3].user:"bad name" is not a Slurm user name`, "23:limits[4]:a second limit"}},
		{"limit key", good + "limits:\n  - account: nlp\n    max_gpu: 2\n", []string{`18:limits[0].max_gpu:unknown key "max_gpu"`}},
		{"accounting", good + "accounting:\n  idle_owner: nobody\n  default_time_limit: -1h\n", []string{`17:accounting.idle_owner:"nobody": want launching-job`, "18:accounting.default_time_limit:"}},
		{"several at once", strings.NewReplacer("max_nodes: 4", "max_nodes: -1", "capacity: spot", "capacity: cheap", "[g5.xlarge]", "[g5.12xlarge, x1.nothing]").Replace(good),
			[]string{"10:classes[0].max_nodes:at least 1", "11:classes[0].instance_types[0]:has 4 GPUs", "11:classes[0].instance_types[1]:not in the GPU catalog", `12:classes[0].capacity:"cheap"`}},
		{"spot allocation strategy", strings.Replace(good, "capacity: spot", "capacity: spot\n    spot_allocation_strategy: cheapest", 1),
			[]string{`13:classes[0].spot_allocation_strategy:"cheapest" is not an EC2 Fleet spot allocation strategy; one of price-capacity-optimized,`}},
		{"reservations", strings.Replace(good, "capacity: spot", "capacity: spot\n    reservations:\n      ids: [cr-0123456789abcdef0, cr-12, cr-0123456789abcdef0]\n      resource_group_arn: arn:aws:ec2:us-east-1:123456789012:group/x", 1),
			[]string{`14:classes[0].reservations.ids[1]:"cr-12" is not a capacity reservation id`, "14:classes[0].reservations.ids[2]:cr-0123456789abcdef0 is listed twice",
				`15:classes[0].reservations.resource_group_arn:"arn:aws:ec2:us-east-1:123456789012:group/x" is not a resource group ARN`}},
		{"capacity blocks", strings.Replace(good, "capacity: spot", "capacity: spot\n    reservations:\n      ids: [cr-0123456789abcdef0]\n      capacity_blocks:\n        - {id: cr-0123456789abcdef0, price_usd: 100}\n        - {id: cb-1}\n        - {id: cr-0123456789abcdef1, price_usd: -2}", 1),
			[]string{"16:classes[0].reservations.capacity_blocks[0].id:cr-0123456789abcdef0 is listed twice", `17:classes[0].reservations.capacity_blocks[1].id:"cb-1" is not a capacity reservation id`,
				"17:classes[0].reservations.capacity_blocks[1].price_usd:want the block's upfront price", "18:classes[0].reservations.capacity_blocks[2].price_usd:want the block's upfront price"}},
		{"reservations only without any", strings.Replace(good, "capacity: spot", "capacity: spot\n    reservations: {only: true}", 1),
			[]string{"13:classes[0].reservations.only:only: true needs ids or resource_group_arn"}},
		{"gpu model", strings.Replace(good, "gpu_model: a10g", "gpu_model: a11g", 1),
			[]string{`8:classes[0].gpu_model:"a11g" is not an NVIDIA GPU model`}},
		{"duration", strings.Replace(good, "controller: 10.0.0.1", "controller: 10.0.0.1\n  resume_timeout: soon", 1),
			[]string{`5:slurm.resume_timeout:"soon" is not a duration`}},
		{"warm pool values", strings.Replace(good, "capacity: spot", "capacity: spot\n    warm_usd_per_day: -5", 1) + "warm:\n  enabled: true\n  quantile: 1\n  profile_weight: 1.5\n  half_life: 0s\n",
			[]string{"13:classes[0].warm_usd_per_day:want US dollars per day >= 0", "18:warm.enabled:no class has a warm pool", "19:warm.quantile:want a share between 0 and 1", "20:warm.profile_weight:want a number from 0", "21:warm.half_life:must be a positive duration"}},
		{"warm unknown key", good + "warm:\n  enable: true\n", []string{`17:warm.enable:did you mean "enabled"`}},
		{"sizer urls", good + "sizer:\n  urls: [http://b:1]\n", []string{`17:sizer.urls[0]:"http://b:1" is not an https:// URL`, "17:sizer.urls:set sizer.store.driver: postgres"}},
		{"store driver", good + "sizer:\n  store:\n    driver: mysql\n", []string{`18:sizer.store.driver:"mysql": want sqlite`}},
		{"store postgres options on sqlite", good + "sizer:\n  store:\n    url: postgres://db/burst\n", []string{"17:sizer.store:apply to driver postgres only"}},
		{"store postgres", good + "sizer:\n  store:\n    driver: postgres\n    url: postgres://burst:secret@db/burst\n    password_file: pw\n    tls: {mode: verify, cert_file: /c.pem}\n    max_conns: -1\n",
			[]string{"19:sizer.store.url:holds a password: move it to sizer.store.password_file", "20:sizer.store.password_file:", `21:sizer.store.tls.mode:"verify": want disable`,
				"21:sizer.store.tls:cert_file and key_file go together", "22:sizer.store.max_conns:-1 is outside 0..1000"}},
		{"store postgres without url", good + "sizer:\n  store:\n    driver: postgres\n", []string{"17:sizer.store.url:required with driver postgres"}},
		{"store dsn password", good + "sizer:\n  store:\n    driver: postgres\n    url: host=db dbname=burst password=x\n", []string{"19:sizer.store.url:remove password= from the DSN"}},
		{"static credentials without an emulator", strings.Replace(good, "region: us-east-1}", "region: us-east-1, ec2_static_credentials: true}", 1),
			[]string{"2:cluster.ec2_static_credentials:only work with an EC2 emulator"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), "burst.yaml")
			if err == nil {
				err = cfg.Validate()
			}
			ps, ok := err.(Problems)
			if !ok {
				t.Fatalf("want Problems, got %v", err)
			}
			if len(ps) != len(tc.want) {
				t.Fatalf("want %d problems, got %d:\n%v", len(tc.want), len(ps), err)
			}
			for _, w := range tc.want {
				parts := strings.SplitN(w, ":", 3)
				found := false
				for _, p := range ps {
					if p.Path == parts[1] && strings.Contains(p.Msg, parts[2]) && p.String() != "" &&
						strings.HasPrefix(p.String(), "burst.yaml:"+parts[0]+":") {
						found = true
					}
				}
				if !found {
					t.Errorf("missing problem %q in:\n%v", w, err)
				}
			}
			if !IsInvalid(err) {
				t.Error("IsInvalid false")
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || IsInvalid(err) {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "b.yaml")
	for body, want := range map[string]string{"": "empty", "a: [": "not valid YAML", "---\na: 1\n---\nb: 2\n": "more than one"} {
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	cfg, err := Parse([]byte(good), "x")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BURST_LOG_FILE": "/tmp/x.log", "BURST_EC2_ENDPOINT": "http://127.0.0.1:1"}
	cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if cfg.Log.File != "/tmp/x.log" || cfg.Cluster.EC2Endpoint != "http://127.0.0.1:1" {
		t.Fatalf("overrides not applied: %+v %+v", cfg.Log, cfg.Cluster)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("classes: [{name: 1}]"))
	f.Add([]byte("cluster: &a {name: x}\nslurm: *a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "f")
		if err == nil {
			_ = cfg.Validate()
		}
	})
}

// TestLoadReportsEverything: one run reports unknown keys, wrong types and
// validation problems together, one per problem, each with path and line.
func TestLoadReportsEverything(t *testing.T) {
	body := strings.NewReplacer(
		"cluster: {name: t, region: us-east-1}", "cluster: {name: t, region: us-east-1, colour: red}",
		"max_nodes: 4", "max_nodes: -4",
		"gpus_per_node: 1", "gpus_per_node: one",
		"subnets: {us-east-1a: subnet-1}", "subnets: {}",
	).Replace(good) + "budgets:\n  - monthly_usd: 10\n"
	p := filepath.Join(t.TempDir(), "burst.yaml")
	os.WriteFile(p, []byte(body), 0o600)
	_, err := Load(p)
	ps, ok := err.(Problems)
	if !ok {
		t.Fatalf("want Problems, got %v", err)
	}
	want := []string{"cluster.colour", "classes[0].zones", "classes[0].gpus_per_node", "classes[0].max_nodes", "budgets[0].account"}
	if len(ps) != len(want) {
		t.Fatalf("want %d problems, got:\n%v", len(want), err)
	}
	for i, w := range want {
		if ps[i].Path != w || ps[i].Line == 0 {
			t.Errorf("problem %d: got %s, want path %s with a line", i, ps[i], w)
		}
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BURST_CONFIG", "")
	t.Setenv("SLURM_CONF", filepath.Join(dir, "slurm.conf"))
	if got := Resolve("", os.Getenv); got != DefaultPath {
		t.Fatalf("no burst.yaml beside slurm.conf: got %s", got)
	}
	os.WriteFile(filepath.Join(dir, "burst.yaml"), []byte(good), 0o600)
	if got := Resolve("", os.Getenv); got != filepath.Join(dir, "burst.yaml") {
		t.Fatalf("beside slurm.conf: got %s", got)
	}
	t.Setenv("BURST_CONFIG", "/x.yaml")
	if got := Resolve("", os.Getenv); got != "/x.yaml" {
		t.Fatalf("env: got %s", got)
	}
	if got := Resolve("/flag.yaml", os.Getenv); got != "/flag.yaml" {
		t.Fatalf("flag: got %s", got)
	}
}
