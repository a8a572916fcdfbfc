package reconcile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/slurm"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func inst(id, node, state string, age time.Duration, ip string) cloud.Instance {
	return cloud.Instance{ID: id, Node: node, State: state, LaunchTime: t0.Add(-age), PrivateIP: ip}
}

func node(name, state string, flags ...string) slurm.Node {
	return slurm.Node{Name: name, State: state, Flags: append([]string{"CLOUD"}, flags...), Addr: name}
}

func withAddr(n slurm.Node, addr string) slurm.Node { n.Addr = addr; return n }

// brief renders actions compactly: kind/reason/node/ids.
func brief(acts []Action) []string {
	out := []string{}
	for _, a := range acts {
		out = append(out, string(a.Kind)+"/"+string(a.Reason)+"/"+a.Node+"/"+strings.Join(a.InstanceIDs, ","))
	}
	return out
}

func TestPlan(t *testing.T) {
	opts := PlanOptions{Grace: time.Minute, ResumeTimeout: 5 * time.Minute}
	mem := NewMemory()
	mem.PoweringUpSince["gpu-9"] = t0.Add(-6 * time.Minute)
	mem.PoweringUpSince["gpu-8"] = t0.Add(-1 * time.Minute)
	mem.LastInstance["gpu-4"] = "i-old4"
	cases := []struct {
		name  string
		insts []cloud.Instance
		nodes []slurm.Node
		mem   *Memory
		want  []string
	}{
		{"agree: running instance, idle node", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE")}, nil, []string{}},
		{"agree: allocated node", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "ALLOCATED")}, nil, []string{}},
		{"agree: powered down, no instance", nil, []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")}, nil, []string{}},
		{"orphan: node powered down, old instance", []cloud.Instance{inst("i-1", "gpu-1", "running", 2*time.Minute, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")}, nil, []string{"terminate/orphan/gpu-1/i-1"}},
		{"young instance of a powered-down node waits (eventual consistency)", []cloud.Instance{inst("i-1", "gpu-1", "pending", 10*time.Second, "")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")}, nil, []string{}},
		{"orphan: unknown node", []cloud.Instance{inst("i-1", "zzz-1", "running", time.Hour, "")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")}, nil, []string{"terminate/orphan/zzz-1/i-1"}},
		{"orphan: no node tag", []cloud.Instance{inst("i-1", "", "running", time.Hour, "")}, nil, nil, []string{"terminate/no-node-tag//i-1"}},
		{"no node tag but young", []cloud.Instance{inst("i-1", "", "pending", time.Second, "")}, nil, nil, []string{}},
		{"powering up with its instance is fine", []cloud.Instance{inst("i-1", "gpu-1", "pending", 20*time.Second, "")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN", "POWERING_UP")}, nil, []string{}},
		{"powering down with instance still there is fine (suspend terminates it)", []cloud.Instance{inst("i-1", "gpu-1", "running", 30*time.Second, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERING_DOWN")}, nil, []string{}},
		{"powering down with an old instance is suspend's to terminate", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERING_DOWN")}, nil, []string{}},
		{"powering down, seen so for less than grace: still suspend's", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERING_DOWN")}, &Memory{PoweringDownSince: map[string]time.Time{"gpu-1": t0.Add(-30 * time.Second)}}, []string{}},
		{"powering down for longer than grace: orphan", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERING_DOWN")}, &Memory{PoweringDownSince: map[string]time.Time{"gpu-1": t0.Add(-2 * time.Minute)}}, []string{"terminate/orphan/gpu-1/i-1"}},
		{"power down requested (ASAP) keeps its instance", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "ALLOCATED", "POWER_DOWN")}, nil, []string{}},
		{"duplicate: keep the one at NodeAddr", []cloud.Instance{
			inst("i-a", "gpu-1", "running", 10*time.Minute, "10.0.0.1"), inst("i-b", "gpu-1", "running", 5*time.Minute, "10.0.0.2")},
			[]slurm.Node{withAddr(node("gpu-1", "ALLOCATED"), "10.0.0.1")}, nil, []string{"terminate/duplicate/gpu-1/i-b"}},
		{"duplicate: no address match keeps the newest", []cloud.Instance{
			inst("i-a", "gpu-1", "running", 10*time.Minute, "10.0.0.1"), inst("i-b", "gpu-1", "running", 5*time.Minute, "10.0.0.2")},
			[]slurm.Node{node("gpu-1", "IDLE")}, nil, []string{"terminate/duplicate/gpu-1/i-a"}},
		{"duplicate: young second instance waits", []cloud.Instance{
			inst("i-a", "gpu-1", "running", 10*time.Minute, "10.0.0.1"), inst("i-b", "gpu-1", "pending", 5*time.Second, "")},
			[]slurm.Node{withAddr(node("gpu-1", "ALLOCATED"), "10.0.0.1")}, nil, []string{}},
		{"instance gone under an allocated node", []cloud.Instance{inst("i-1", "gpu-1", "shutting-down", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "ALLOCATED")}, nil, []string{"hand-back/instance-gone/gpu-1/i-1"}},
		{"instance missing entirely: reason from memory", nil,
			[]slurm.Node{node("gpu-4", "MIXED")}, mem, []string{"hand-back/instance-gone/gpu-4/i-old4"}},
		{"instance missing entirely, nothing remembered", nil,
			[]slurm.Node{node("gpu-5", "IDLE")}, nil, []string{"hand-back/instance-gone/gpu-5/"}},
		{"stopped instance under an idle node", []cloud.Instance{inst("i-1", "gpu-1", "stopped", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE")}, nil, []string{"terminate/stopped/gpu-1/i-1", "hand-back/instance-gone/gpu-1/i-1"}},
		{"down node (not powered down) is left alone", []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "DOWN", "NOT_RESPONDING")}, nil, []string{}},
		{"down node without instance is not handed back", nil, []slurm.Node{node("gpu-1", "DOWN")}, nil, []string{}},
		{"stuck powering up past the resume timeout", []cloud.Instance{inst("i-1", "gpu-1", "running", 6*time.Minute, "10.0.0.1")},
			[]slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN", "POWERING_UP")}, nil,
			[]string{"terminate/resume-timeout/gpu-1/i-1", "hand-back/resume-timeout/gpu-1/i-1"}},
		{"powering up without instance, watched past the timeout", nil,
			[]slurm.Node{node("gpu-9", "IDLE", "POWERED_DOWN", "POWERING_UP"), node("gpu-8", "IDLE", "POWERED_DOWN", "POWERING_UP")}, mem,
			[]string{"hand-back/resume-timeout/gpu-9/"}},
		{"non-cloud nodes are not burst's", nil, []slurm.Node{{Name: "login-1", State: "IDLE"}}, nil, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := opts
			o.Memory = c.mem
			got := brief(Plan(c.insts, c.nodes, t0, o))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %v\nwant %v", got, c.want)
			}
		})
	}
}

func TestPlanOwned(t *testing.T) {
	insts := []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "")}
	nodes := []slurm.Node{{Name: "gpu-1", State: "IDLE"}} // no CLOUD flag: owned by name
	got := brief(Plan(insts, nodes, t0, PlanOptions{Grace: time.Minute, Owned: func(n string) bool { return strings.HasPrefix(n, "gpu-") }}))
	if len(got) != 0 {
		t.Fatalf("owned idle node with its instance: got %v", got)
	}
	got = brief(Plan(insts, nodes, t0, PlanOptions{Grace: time.Minute, Owned: func(string) bool { return false }}))
	if want := []string{"terminate/orphan/gpu-1/i-1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("instance of a node burst does not own: got %v want %v", got, want)
	}
}

func TestPlanReasonText(t *testing.T) {
	acts := Plan([]cloud.Instance{inst("i-0abc", "gpu-1", "shutting-down", time.Hour, "")},
		[]slurm.Node{node("gpu-1", "ALLOCATED")}, t0, PlanOptions{Grace: time.Minute})
	if len(acts) != 1 || acts[0].Detail != "burst: instance i-0abc gone (shutting-down)" {
		t.Fatalf("got %+v", acts)
	}
}

func TestMemory(t *testing.T) {
	m := NewMemory()
	up := []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN", "POWERING_UP")}
	m.Observe(nil, up, t0)
	m.Observe(nil, up, t0.Add(time.Minute))
	if got := m.PoweringUpSince["gpu-1"]; !got.Equal(t0) {
		t.Fatalf("powering up since %v, want first sighting %v", got, t0)
	}
	m.Observe([]cloud.Instance{inst("i-1", "gpu-1", "running", 0, "")}, []slurm.Node{node("gpu-1", "IDLE")}, t0.Add(2*time.Minute))
	if _, ok := m.PoweringUpSince["gpu-1"]; ok {
		t.Fatal("still remembered as powering up after it came up")
	}
	if m.LastInstance["gpu-1"] != "i-1" {
		t.Fatalf("last instance %q", m.LastInstance["gpu-1"])
	}
	down := []slurm.Node{node("gpu-1", "IDLE", "POWERING_DOWN")}
	m.Observe([]cloud.Instance{inst("i-1", "gpu-1", "running", 0, "")}, down, t0.Add(150*time.Second))
	m.Observe([]cloud.Instance{inst("i-1", "gpu-1", "running", 0, "")}, down, t0.Add(160*time.Second))
	if got := m.PoweringDownSince["gpu-1"]; !got.Equal(t0.Add(150 * time.Second)) {
		t.Fatalf("powering down since %v, want first sighting %v", got, t0.Add(150*time.Second))
	}
	m.Observe(nil, []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")}, t0.Add(3*time.Minute))
	if _, ok := m.LastInstance["gpu-1"]; ok {
		t.Fatal("last instance kept after the node powered down")
	}
	if _, ok := m.PoweringDownSince["gpu-1"]; ok {
		t.Fatal("still remembered as powering down after it powered down")
	}
}
