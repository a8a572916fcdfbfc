package nodeid

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	cases := []struct {
		name string
		tags map[string]string
		want string
		err  string
	}{
		{"single", map[string]string{"burst:node": "gpu-4", "burst:cluster": "lab"}, "gpu-4", ""},
		{"node tag wins over the fleet list", map[string]string{"burst:node": "gpu-4", "burst:nodes": "gpu-1,gpu-2"}, "gpu-4", ""},
		{"fleet instance not tagged yet", map[string]string{"burst:nodes": "gpu-1,gpu-2"}, "", "without its burst:node tag yet"},
		{"no tags", map[string]string{"burst:cluster": "lab"}, "", "no burst:node tag"},
		{"nil tags", nil, "", "no burst:node tag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Of(c.tags)
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
	if got := Fleet(tagMap(ts)); !slices.Equal(got, names) {
		t.Fatalf("Fleet = %v", got)
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
		if len(names) < 2 {
			return
		}
		if got := Fleet(tagMap(Tags(names))); !slices.Equal(got, names) {
			t.Fatalf("Fleet(Tags(%q)) = %q", names, got)
		}
	})
}
