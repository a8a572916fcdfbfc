package main

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/iampolicy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

const cfnLint = "/root/.pyenv/shims/cfn-lint"

func template(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, code := runConf(t, append([]string{"--config", example, "cloudformation"}, args...)...)
	if code != 0 {
		t.Fatalf("cloudformation %v: code %d\n%s", args, code, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("cloudformation %v printed no JSON: %v\n%s", args, err, out)
	}
	return m
}

// TestCloudFormationGolden compares the template for examples/burst.yaml
// (without and with FSx) with the reviewed files in testdata; after an
// intended change, rerun with -update and review the diff.
func TestCloudFormationGolden(t *testing.T) {
	for name, args := range map[string][]string{
		"cloudformation":     nil,
		"cloudformation-fsx": {"--fsx-s3", "s3://ml-prod-checkpoints/burst"},
	} {
		out, code := runConf(t, append([]string{"--config", example, "cloudformation"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: code %d\n%s", name, code, out)
		}
		golden := filepath.Join("testdata", name+".golden.json")
		if *update {
			if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./slurm-conf -run TestCloudFormationGolden -update once)", err)
		}
		if out != string(want) {
			t.Errorf("%s differs from %s (rerun with -update if intended, and review the diff):\n%s", name, golden, out)
		}
	}
}

// TestCloudFormationPolicyIsIAMPolicy: the head node's managed policy has
// iam-policy's statements, with the stack's queue and node role where an
// admin passes their ARNs; the node role has iam-policy --node's.
func TestCloudFormationPolicyIsIAMPolicy(t *testing.T) {
	tpl := template(t)
	res := tpl["Resources"].(map[string]any)
	props := func(name string) map[string]any {
		r, ok := res[name].(map[string]any)
		if !ok {
			t.Fatalf("template has no resource %s; it has %v", name, keys(res))
		}
		return r["Properties"].(map[string]any)
	}
	head := props("HeadNodePolicy")["PolicyDocument"].(map[string]any)
	printed, code := runConf(t, "--config", example, "iam-policy", "--pass-role", "arn:aws:iam::123456789012:role/x")
	if code != 0 {
		t.Fatal(printed)
	}
	var want iampolicy.Document
	if err := json.Unmarshal([]byte(printed), &want); err != nil {
		t.Fatal(err)
	}
	got := head["Statement"].([]any)
	bySid := map[string]map[string]any{}
	for _, s := range got {
		m := s.(map[string]any)
		bySid[m["Sid"].(string)] = m
	}
	for _, w := range want.Statement {
		g, ok := bySid[w.Sid]
		if !ok {
			t.Errorf("the template's head policy lacks iam-policy's statement %s", w.Sid)
			continue
		}
		if !reflect.DeepEqual(toStrings(g["Action"]), w.Action) {
			t.Errorf("%s: actions %v, iam-policy prints %v", w.Sid, g["Action"], w.Action)
		}
		if w.Sid == "BurstReadInterruptionQueue" {
			continue // the stack's queue, checked below
		}
		if w.Sid == "BurstPassNodeRole" {
			if !reflect.DeepEqual(g["Resource"], []any{map[string]any{"Fn::GetAtt": []any{"NodeRole", "Arn"}}}) {
				t.Errorf("PassRole resource %v: want the stack's NodeRole", g["Resource"])
			}
			continue
		}
		if !reflect.DeepEqual(toStrings(g["Resource"]), w.Resource) {
			t.Errorf("%s: resources %v, iam-policy prints %v", w.Sid, g["Resource"], w.Resource)
		}
	}
	q, ok := bySid["BurstReadInterruptionQueue"]
	if !ok || !reflect.DeepEqual(q["Resource"], []any{map[string]any{"Fn::GetAtt": []any{"InterruptionQueue", "Arn"}}}) ||
		!reflect.DeepEqual(toStrings(q["Action"]), iampolicy.SQSActions) {
		t.Errorf("queue statement %v: want %v on the stack's InterruptionQueue", q, iampolicy.SQSActions)
	}
	if len(got) != len(want.Statement) {
		t.Errorf("head policy has %d statements; iam-policy (with interruptions.queue_url and --pass-role) prints %d", len(got), len(want.Statement))
	}
	raw, _ := json.Marshal(tpl)
	if strings.Contains(string(raw), "placeholder") || strings.Contains(string(raw), "000000000000") {
		t.Errorf("a placeholder ARN is left in the template:\n%s", raw)
	}
	// the queue accepts exactly the four rules' messages (EC2's three and
	// AWS Health's scheduled changes of EC2 instances)
	qp := props("InterruptionQueuePolicy")["PolicyDocument"].(map[string]any)["Statement"].([]any)[0].(map[string]any)
	src := qp["Condition"].(map[string]any)["ArnEquals"].(map[string]any)["aws:SourceArn"].([]any)
	if len(src) != 4 || qp["Principal"].(map[string]any)["Service"] != "events.amazonaws.com" {
		t.Errorf("queue policy %v: want events.amazonaws.com from the four rules", qp)
	}
	health := `"EventPattern":{"detail":{"eventTypeCategory":["scheduledChange"],"service":["EC2"]},"detail-type":["AWS Health Event"],"source":["aws.health"]}`
	if !strings.Contains(string(raw), health) {
		t.Errorf("no EventBridge rule %s", health)
	}
	for _, d := range []string{"EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification"} {
		if !strings.Contains(string(raw), `"detail-type":["`+d+`"]`) {
			t.Errorf("no EventBridge rule for %q", d)
		}
	}
	// slurmctld 6817 and the sizer 8472 (examples/burst.yaml) from the nodes; slurmd 6818 from the head
	for name, port := range map[string]float64{"NodesToSlurmctld": 6817, "NodesToSizer": 8472, "HeadToSlurmd": 6818} {
		if p := props(name); p["FromPort"] != port || p["ToPort"] != port {
			t.Errorf("%s: ports %v-%v, want %v", name, p["FromPort"], p["ToPort"], port)
		}
	}
	if _, ok := res["FileSystem"]; ok {
		t.Error("FSx in the template without --fsx-s3")
	}
	if fsx := template(t, "--fsx-s3", "s3://b-1/ck")["Resources"].(map[string]any); fsx["FileSystem"] == nil || fsx["CheckpointRepository"] == nil {
		t.Errorf("--fsx-s3: no FileSystem or CheckpointRepository in %v", keys(fsx))
	}
}

func TestCloudFormationBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--fsx-s3", "https://bucket/x"},
		{"--fsx-s3", "s3://b-1/ck", "--fsx-capacity", "1000"},
		{"--fsx-s3", "s3://b-1/ck", "--fsx-path", "relative"},
		{"stray"},
	} {
		out, code := runConf(t, append([]string{"--config", example, "cloudformation"}, args...)...)
		if code != 2 || !strings.Contains(out, "burst-slurm-conf:") {
			t.Errorf("cloudformation %v: code %d, want 2 with a message\n%s", args, code, out)
		}
	}
}

// TestCloudFormationLint runs cfn-lint on both templates; it skips without
// cfn-lint unless BURST_REQUIRE_TOOLS=1 (make test), where it fails.
func TestCloudFormationLint(t *testing.T) {
	lint := cfnLint
	if _, err := os.Stat(lint); err != nil {
		p, err := exec.LookPath("cfn-lint")
		if err != nil {
			if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
				t.Fatalf("cfn-lint is not installed and BURST_REQUIRE_TOOLS=1: pip install cfn-lint (scripts/install-deps.sh checks it)")
			}
			t.Skip("SKIPPING: cfn-lint not installed (pip install cfn-lint); set BURST_REQUIRE_TOOLS=1 to make this a failure")
		}
		lint = p
	}
	dir := t.TempDir()
	for name, args := range map[string][]string{"plain": nil, "fsx": {"--fsx-s3", "s3://ml-prod-checkpoints/burst"}} {
		out, code := runConf(t, append([]string{"--config", example, "cloudformation"}, args...)...)
		if code != 0 {
			t.Fatal(out)
		}
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, []byte(out), 0o644)
		if lo, err := exec.Command(lint, p).CombinedOutput(); err != nil {
			t.Errorf("cfn-lint %s: %v\n%s", name, err, lo)
		}
	}
	// and cfn-lint does find a broken template (the check can fail)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"Resources":{"Q":{"Type":"AWS::SQS::Queue","Properties":{"Bogus":1}}}}`), 0o644)
	if err := exec.Command(lint, bad).Run(); err == nil {
		t.Error("cfn-lint passed a template with an unknown property: the lint check cannot fail")
	}
}

func toStrings(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
