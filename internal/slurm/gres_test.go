package slurm

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseGRES(t *testing.T) {
	tests := []struct {
		in   string
		want []GRES
	}{
		{"", nil},
		{"(null)", nil},
		{"N/A", nil},
		{"gpu", []GRES{{Name: "gpu", Count: 1}}},
		{"gpu:2", []GRES{{Name: "gpu", Count: 2}}},
		{"gpu:a10g", []GRES{{Name: "gpu", Type: "a10g", Count: 1}}},
		{"gpu:a10g:2", []GRES{{Name: "gpu", Type: "a10g", Count: 2}}},
		{"gres:gpu:h100:8", []GRES{{Name: "gpu", Type: "h100", Count: 8}}},
		{"gres:gpu:2", []GRES{{Name: "gpu", Count: 2}}},
		{"gpu:a100:4(S:0-1)", []GRES{{Name: "gpu", Type: "a100", Count: 4, Detail: "S:0-1"}}},
		{"gpu:a100:4(S:0,1)", []GRES{{Name: "gpu", Type: "a100", Count: 4, Detail: "S:0,1"}}},
		{"gpu:a100:0(IDX:N/A)", []GRES{{Name: "gpu", Type: "a100", Count: 0, Detail: "IDX:N/A"}}},
		{"gpu:a10g:1(IDX:0)", []GRES{{Name: "gpu", Type: "a10g", Count: 1, Detail: "IDX:0"}}},
		{"gpu:2,nic:1", []GRES{{Name: "gpu", Count: 2}, {Name: "nic", Count: 1}}},
		{"gres:gpu:a10g:2,gres:shard:4", []GRES{{Name: "gpu", Type: "a10g", Count: 2}, {Name: "shard", Count: 4}}},
		{"gres/gpu=2", []GRES{{Name: "gpu", Count: 2}}},
		{"gres/gpu:a10g=2", []GRES{{Name: "gpu", Type: "a10g", Count: 2}}},
		{"gpu:1g.5gb:7", []GRES{{Name: "gpu", Type: "1g.5gb", Count: 7}}},
		{"mps:2k", []GRES{{Name: "mps", Count: 2048}}},
		{"gpu:2t0", []GRES{{Name: "gpu", Type: "2t0", Count: 1}}},
		{" gpu:2 ", []GRES{{Name: "gpu", Count: 2}}},
	}
	for _, tt := range tests {
		got, err := ParseGRES(tt.in)
		if err != nil {
			t.Errorf("ParseGRES(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseGRES(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseGRESErrors(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"gpu:a10g:x", `count "x" is not a non-negative integer`},
		{"gpu:a10g:-1", `count "-1" is not a non-negative integer`},
		{"gpu:a:b:c", "too many ':' fields"},
		{":2", "empty name"},
		{"gpu,,nic", `item 2 ""`},
		{"gpu:a10g:2(S:0", "unclosed '('"},
		{"gpu:2)", "unbalanced ')'"},
		{"gpu:a10g:2()", "empty parentheses"},
		{"gpu:a10g:2(S:0)x", "text after ')'"},
		{"gpu:a1 0g:2", `has character ' '`},
		{"gpu:a10g:99999999999999999999", "not a non-negative integer"},
		{"gpu:a10g:2t0", "not a non-negative integer"},
		{"gpu:2048t", "larger than"},
		{"gres/gpu=", "malformed TRES form"},
		{"gpu:((S:0))", "nested parenthesis"},
	}
	for _, tt := range tests {
		_, err := ParseGRES(tt.in)
		if err == nil {
			t.Errorf("ParseGRES(%q): no error, want %q", tt.in, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseGRES(%q) error %q, want it to contain %q", tt.in, err, tt.wantErr)
		}
		if !strings.Contains(err.Error(), "want NAME[:TYPE][:COUNT]") && !strings.Contains(err.Error(), "parenthes") && !strings.Contains(err.Error(), "')'") && !strings.Contains(err.Error(), "'('") {
			t.Errorf("ParseGRES(%q) error %q does not say what is expected", tt.in, err)
		}
	}
}

func FuzzParseGRES(f *testing.F) {
	for _, s := range []string{"gpu", "gpu:2", "gpu:a10g:2", "gres:gpu:h100:8", "gpu:a100:4(S:0-1)", "gpu:2,nic:1",
		"gres/gpu:a10g=2", "gpu:a100:0(IDX:N/A)", "mps:2k", "gpu:((", "gpu:a:b:c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseGRES(s)
		if err != nil {
			return
		}
		// Whatever parses must format and re-parse to the same thing.
		var parts []string
		for _, g := range list {
			if g.Name == "" || g.Count > maxGRESCount {
				t.Fatalf("ParseGRES(%q) = %+v: invalid item", s, g)
			}
			parts = append(parts, g.String())
		}
		again, err := ParseGRES(strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("re-parsing %q (from %q): %v", strings.Join(parts, ","), s, err)
		}
		if len(list) > 0 && !reflect.DeepEqual(again, list) {
			t.Fatalf("round trip of %q: %+v != %+v", s, again, list)
		}
	})
}
