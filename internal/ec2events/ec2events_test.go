package ec2events

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var cluster = Expect{Account: "123456789012", Region: "us-east-1"}

// TestGolden parses the events in testdata as EventBridge delivers them
// (shapes from EC2's documentation and the emulator) and compares with
// the .golden files (go test -update rewrites them; review the diff).
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) < 4 {
		t.Fatalf("%d golden inputs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := Parse(b, cluster)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(ev, "", "  ")
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				os.WriteFile(golden, got, 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("parsed\n%s\nwant (%s)\n%s", got, golden, want)
			}
		})
	}
}

// TestParseHealth: an AWS Health event is refused when it is not EC2's
// scheduled change of one of the cluster's instances as AWS sends it.
func TestParseHealth(t *testing.T) {
	base, _ := os.ReadFile("testdata/scheduled-retirement.json")
	edit := func(f func(m, d map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(base, &m)
		f(m, m["detail"].(map[string]any))
		b, _ := json.Marshal(m)
		return b
	}
	for name, body := range map[string][]byte{
		"another service": edit(func(_, d map[string]any) { d["service"] = "RDS" }),
		"not scheduled":   edit(func(_, d map[string]any) { d["eventTypeCategory"] = "issue" }),
		"unknown type":    edit(func(_, d map[string]any) { d["eventTypeCode"] = "AWS_EC2_OPERATIONAL_ISSUE" }),
		"no start":        edit(func(_, d map[string]any) { delete(d, "startTime") }),
		"bad start":       edit(func(_, d map[string]any) { d["startTime"] = "soon" }),
		"no entity":       edit(func(_, d map[string]any) { d["affectedEntities"] = []any{} }),
		"bad entity": edit(func(_, d map[string]any) {
			d["affectedEntities"] = []any{map[string]any{"entityValue": "i-; rm -rf /"}}
		}),
		"entity not resource": edit(func(m, _ map[string]any) { m["resources"] = []any{"i-abcd2222"} }),
		"another account":     edit(func(m, _ map[string]any) { m["account"] = "999999999999" }),
		"another region":      edit(func(m, _ map[string]any) { m["region"] = "eu-west-1" }),
		"another detail type": edit(func(m, _ map[string]any) { m["detail-type"] = "AWS Health Abuse Event" }),
		"unknown status":      edit(func(_, d map[string]any) { d["statusCode"] = "done" }),
	} {
		if ev, err := Parse(body, cluster); err == nil {
			t.Errorf("%s: accepted as %+v", name, ev)
		}
	}
	for status, closed := range map[string]bool{"upcoming": false, "open": false, "closed": true} {
		ev, err := Parse(edit(func(_, d map[string]any) { d["statusCode"] = status }), cluster)
		if err != nil || ev.Closed != closed {
			t.Errorf("statusCode %s: Closed %v, %v; want %v", status, ev.Closed, err, closed)
		}
	}
}

// TestFromStatus: DescribeInstanceStatus's form of a scheduled event is
// the Event of its AWS Health form (same kind, code and window, so the two
// are de-duplicated alike); completed and canceled ones are Closed; a bad
// instance id, an unknown code or a missing start is refused.
func TestFromStatus(t *testing.T) {
	nb, na := time.Date(2026, 12, 14, 8, 0, 0, 0, time.UTC), time.Date(2026, 12, 14, 10, 0, 0, 0, time.UTC)
	se := StatusEvent{InstanceID: "i-abcd1111", EventID: "instance-event-0d59937288b749b32", Code: "instance-retirement",
		Description: "The instance is running on degraded hardware", NotBefore: nb, NotAfter: na}
	ev, err := FromStatus(se)
	if err != nil {
		t.Fatal(err)
	}
	health, err := Parse(mustRead(t, "testdata/scheduled-retirement.json"), cluster)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != health.Kind || ev.Code != health.Code || !ev.NotBefore.Equal(health.NotBefore) || !ev.NotAfter.Equal(health.NotAfter) ||
		ev.InstanceID != health.InstanceID || len(ev.Instances) != 1 || ev.Closed || ev.ID != se.EventID {
		t.Errorf("FromStatus = %+v\nthe AWS Health form %+v", ev, health)
	}
	for desc, closed := range map[string]bool{"[Completed] The instance is running on degraded hardware": true, "[Canceled] The instance is scheduled for a reboot": true,
		"The instance is scheduled for a reboot": false} {
		se.Description = desc
		if ev, err := FromStatus(se); err != nil || ev.Closed != closed {
			t.Errorf("%q: Closed %v, %v; want %v", desc, ev.Closed, err, closed)
		}
	}
	for name, edit := range map[string]func(*StatusEvent){
		"instance id": func(s *StatusEvent) { s.InstanceID = "i-../../x" },
		"code":        func(s *StatusEvent) { s.Code = "instance-explode" },
		"no start":    func(s *StatusEvent) { s.NotBefore = time.Time{} },
		"event id":    func(s *StatusEvent) { s.EventID = "a b" },
	} {
		bad := se
		edit(&bad)
		if ev, err := FromStatus(bad); err == nil {
			t.Errorf("%s: accepted as %+v", name, ev)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParse(t *testing.T) {
	base, _ := os.ReadFile("testdata/spot-interruption.json")
	spot := func(edit func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(base, &m)
		edit(m)
		b, _ := json.Marshal(m)
		return b
	}
	ev, err := Parse(base, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != SpotInterruption || ev.Action != "terminate" || ev.InstanceID != "i-0b662ef9931388ba0" ||
		!ev.Deadline().Equal(time.Date(2026, 12, 1, 11, 34, 0, 0, time.UTC)) || ev.Gone() {
		t.Fatalf("Parse = %+v", ev)
	}
	if _, err := Parse(base, Expect{Region: "us-east-1"}); err != nil {
		t.Errorf("any account: %v", err)
	}
	for _, c := range []struct {
		name  string
		body  []byte
		want  Expect
		field string
	}{
		{"other account", base, Expect{Account: "210987654321", Region: "us-east-1"}, "account"},
		{"other region", base, Expect{Account: "123456789012", Region: "eu-west-1"}, "region"},
		{"not json", []byte("hello"), cluster, ""},
		{"array", []byte("[1]"), cluster, ""},
		{"two objects", append(append([]byte{}, base...), base...), cluster, ""},
		{"too large", []byte(`{"version":"0","id":"` + strings.Repeat("a", MaxBody) + `"}`), cluster, ""},
		{"source", spot(func(m map[string]any) { m["source"] = "my.app" }), cluster, "source"},
		{"no source", spot(func(m map[string]any) { delete(m, "source") }), cluster, "source"},
		{"version", spot(func(m map[string]any) { m["version"] = "1" }), cluster, "version"},
		{"id", spot(func(m map[string]any) { m["id"] = "a b" }), cluster, "id"},
		{"detail type", spot(func(m map[string]any) { m["detail-type"] = "AWS API Call via CloudTrail" }), cluster, "detail-type"},
		{"account form", spot(func(m map[string]any) { m["account"] = "12345" }), Expect{Region: "us-east-1"}, "account"},
		{"region form", spot(func(m map[string]any) { m["region"] = "mars" }), Expect{Region: "mars"}, "region"},
		{"time", spot(func(m map[string]any) { m["time"] = "yesterday" }), cluster, "time"},
		{"time type", spot(func(m map[string]any) { m["time"] = 1234 }), cluster, ""},
		{"no detail", spot(func(m map[string]any) { delete(m, "detail") }), cluster, "detail"},
		{"detail string", spot(func(m map[string]any) { m["detail"] = "x" }), cluster, "detail"},
		{"instance id", spot(func(m map[string]any) {
			m["detail"] = map[string]any{"instance-id": "i-../../etc", "instance-action": "terminate"}
		}), cluster, "detail.instance-id"},
		{"action", spot(func(m map[string]any) {
			m["detail"] = map[string]any{"instance-id": "i-0b662ef9931388ba0", "instance-action": "explode"}
		}), cluster, "detail.instance-action"},
		{"no action", spot(func(m map[string]any) { m["detail"] = map[string]any{"instance-id": "i-0b662ef9931388ba0"} }), cluster, "detail.instance-action"},
		{"no resources", spot(func(m map[string]any) { delete(m, "resources") }), cluster, "resources"},
		{"other instance", spot(func(m map[string]any) {
			m["resources"] = []string{"arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba1"}
		}), cluster, "resources"},
		{"other zone region", spot(func(m map[string]any) {
			m["resources"] = []string{"arn:aws:ec2:eu-west-1b:instance/i-0b662ef9931388ba0"}
		}), cluster, "resources"},
		{"other account arn", spot(func(m map[string]any) {
			m["resources"] = []string{"arn:aws:ec2:us-east-1:210987654321:instance/i-0b662ef9931388ba0"}
		}), cluster, "resources"},
		{"not an instance", spot(func(m map[string]any) { m["resources"] = []string{"arn:aws:ec2:us-east-1:123456789012:volume/vol-1"} }), cluster, "resources"},
		{"state", []byte(strings.Replace(readFile(t, "testdata/state-terminated.json"), `"terminated"`, `"exploded"`, 1)), cluster, "detail.state"},
	} {
		_, err := Parse(c.body, c.want)
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%s: err = %v, want an error on field %q", c.name, err, c.field)
		}
	}
	st, err := Parse([]byte(readFile(t, "testdata/state-terminated.json")), cluster)
	if err != nil || !st.Gone() || !st.Deadline().IsZero() {
		t.Errorf("state change %+v %v", st, err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParse: never panics, never accepts more than MaxBody bytes, and
// what it accepts has the exact forms burst acts on.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"version":"0"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Parse(b, cluster)
		if err != nil {
			return
		}
		if len(b) > MaxBody || !instanceRe.MatchString(ev.InstanceID) || ev.Account != cluster.Account || ev.Region != cluster.Region || ev.Time.IsZero() {
			t.Fatalf("accepted %q as %+v", b, ev)
		}
		switch ev.Kind {
		case SpotInterruption:
			if !actions[ev.Action] || ev.State != "" {
				t.Fatalf("spot %+v", ev)
			}
		case StateChange:
			if !states[ev.State] || ev.Action != "" {
				t.Fatalf("state %+v", ev)
			}
		case Rebalance:
			if ev.Action != "" || ev.State != "" {
				t.Fatalf("rebalance %+v", ev)
			}
		case Scheduled:
			if ev.Code == "" || ev.NotBefore.IsZero() || len(ev.Instances) == 0 || len(ev.Instances) > maxEntities || ev.Action != "" || ev.State != "" {
				t.Fatalf("scheduled %+v", ev)
			}
			for _, id := range ev.Instances {
				if !instanceRe.MatchString(id) {
					t.Fatalf("scheduled %+v: instance %q", ev, id)
				}
			}
		default:
			t.Fatalf("kind %q", ev.Kind)
		}
	})
}
