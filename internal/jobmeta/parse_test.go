package jobmeta

import (
	"strings"
	"testing"
)

func TestCombine(t *testing.T) {
	for _, c := range []struct{ comment, extra, want string }{
		{"burst: params=7B", "", "burst: params=7B"},
		{"", "params=7B deadline=8h", "burst: params=7B deadline=8h"},
		{"", "burst: params=7B", "burst: params=7B"},
		{"nightly eval", "burst: workload=inference", "burst: workload=inference"},
		{"burst: params=7B", "deadline=8h", "burst: params=7B deadline=8h"},
		{"burst: params=7B", "site=x burst: deadline=8h", "burst: params=7B deadline=8h"},
	} {
		if got := Combine(c.comment, c.extra); got != c.want {
			t.Errorf("Combine(%q, %q) = %q, want %q", c.comment, c.extra, got, c.want)
		}
	}
	md, errs := ParseMetadata(Combine("burst: params=7B", "params=13B deadline=8h"))
	if md.Params != 7e9 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "twice") {
		t.Errorf("a key in both: %+v %v", md, errs)
	}
}

// Every key the help lists has a parser and every parser is listed.
func TestEveryKeyHasASetter(t *testing.T) {
	for _, k := range metadataKeys {
		if setters[k] == nil {
			t.Errorf("key %s is listed but has no setter", k)
		}
	}
	if len(setters) != len(metadataKeys) {
		t.Errorf("%d setters for %d listed keys", len(setters), len(metadataKeys))
	}
}
