package nodeid

import (
	"fmt"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	cases := []struct {
		name  string
		tags  map[string]string
		index int
		want  string
		err   string
	}{
		{"single", map[string]string{"burst:node": "gpu-4", "burst:cluster": "lab"}, 0, "gpu-4", ""},
		{"single wins over list", map[string]string{"burst:node": "gpu-4", "burst:nodes": "gpu-1,gpu-2"}, 1, "gpu-4", ""},
		{"fleet index 0", map[string]string{"burst:nodes": "gpu-1,gpu-2"}, 0, "gpu-1", ""},
		{"fleet continued", map[string]string{"burst:nodes": "gpu-1,gpu-2", "burst:nodes.2": "gpu-3"}, 2, "gpu-3", ""},
		{"fleet index too big", map[string]string{"burst:nodes": "gpu-1,gpu-2"}, 2, "", "outside the 2 nodes"},
		{"negative index", map[string]string{"burst:nodes": "gpu-1"}, -1, "", "outside"},
		{"no tags", map[string]string{"burst:cluster": "lab"}, 0, "", "enable instance metadata tags"},
		{"nil tags", nil, 0, "", "neither"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Of(c.tags, c.index)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %q, %v; want error with %q", got, err, c.err)
				}
			} else if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func tagMap(ts []Tag) map[string]string {
	m := map[string]string{}
	for _, t := range ts {
		m[t.Key] = t.Value
	}
	return m
}

func TestTagsRoundTrip(t *testing.T) {
	if ts := Tags([]string{"gpu-1"}); len(ts) != 1 || ts[0] != (Tag{TagNode, "gpu-1"}) {
		t.Fatalf("single node: %v", ts)
	}
	var names []string
	for i := range 80 {
		names = append(names, fmt.Sprintf("gpu-long-name-%03d", i))
	}
	ts := Tags(names)
	if len(ts) < 2 || ts[0].Key != TagNodes || ts[1].Key != "burst:nodes.2" {
		t.Fatalf("80 long names: %v", ts)
	}
	for _, tg := range ts {
		if len(tg.Value) > MaxTagValue {
			t.Fatalf("tag %s is %d chars", tg.Key, len(tg.Value))
		}
	}
	tags := tagMap(ts)
	for i, n := range names {
		if got, err := Of(tags, i); err != nil || got != n {
			t.Fatalf("Of(%d) = %q, %v; want %q", i, got, err, n)
		}
	}
	if _, err := Of(tags, 80); err == nil {
		t.Error("out of range index resolved")
	}
}

func FuzzTags(f *testing.F) {
	f.Add("gpu-1,gpu-2,gpu-3")
	f.Add(strings.Repeat("x", 300) + ",y")
	f.Fuzz(func(t *testing.T, s string) {
		names := strings.Split(s, ",")
		for _, n := range names {
			if n == "" || len(n) > MaxTagValue {
				return
			}
		}
		tags := tagMap(Tags(names))
		for i, n := range names {
			if got, err := Of(tags, i); err != nil || got != n {
				t.Fatalf("Of(%d) = %q, %v; want %q", i, got, err, n)
			}
		}
	})
}
