package slurm

import "testing"

func TestMatchConstraint(t *testing.T) {
	a100 := map[string]bool{"burst": true, "a100": true, "a100x8": true, "nvlink": true}
	for _, c := range []struct {
		expr string
		want bool
		err  bool
	}{
		{"a100", true, false},
		{"a10", false, false}, // the bug of substring matching: a10 is not a100
		{"a1", false, false},
		{"A100", false, false}, // Slurm's names are case-sensitive
		{"a100&nvlink", true, false},
		{"a100&ib", false, false},
		{"a100,nvlink", true, false},
		{"a10|a100", true, false},
		{"a10|l4", false, false},
		{"[a10|a100]", true, false},
		{"[a10*2|a100*4]", true, false},
		{"(a10|a100)&nvlink", true, false},
		{"(a10|a100)&!nvlink", false, false},
		{"!a10", true, false},
		{" a100 & burst ", true, false},
		{"", false, true},
		{"a100&", false, true},
		{"(a100", false, true},
		{"[a100)", false, true},
		{"a100)", false, true},
		{"a100*x", false, true},
		{"a100;rm", false, true},
	} {
		got, err := MatchConstraint(c.expr, a100)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("MatchConstraint(%q) = %v, %v; want %v, error %v", c.expr, got, err, c.want, c.err)
		}
	}
	deep := ""
	for range 40 {
		deep += "("
	}
	if _, err := MatchConstraint(deep+"a100", a100); err == nil {
		t.Error("40 nested parentheses: no error")
	}
}

func FuzzMatchConstraint(f *testing.F) {
	for _, s := range []string{"a100", "(a|b)&!c", "[a*2|b*4]", "a,,b", "((((a))))"} {
		f.Add(s)
	}
	feats := map[string]bool{"a": true, "a100": true, "b": true}
	f.Fuzz(func(t *testing.T, expr string) {
		v, err := MatchConstraint(expr, feats)
		if err != nil && v {
			t.Fatalf("%q: true with an error", expr)
		}
		// a name with no operators matches exactly when it is a feature
		if err == nil && isName(expr) && v != feats[expr] {
			t.Fatalf("%q: %v, want %v", expr, v, feats[expr])
		}
	})
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isFeatureByte(s[i]) {
			return false
		}
	}
	return true
}
