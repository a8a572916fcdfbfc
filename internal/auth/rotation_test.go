package auth

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseRotations(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]int
		err  string
	}{
		{"# c\nnlp 2\n\nvision 1\n", map[string]int{"nlp": 2, "vision": 1}, ""},
		{"", map[string]int{}, ""},
		{"nlp\n", nil, `want "<account> <generation>"`},
		{"nlp 0\n", nil, "want a whole number from 1"},
		{"nlp -1\n", nil, "want a whole number from 1"},
		{"nlp 01\n", nil, "want a whole number from 1"},
		{"nlp x\n", nil, "want a whole number from 1"},
		{"nlp 1\nnlp 2\n", nil, "given twice"},
		{"a/b 1\n", nil, "only letters"},
	} {
		got, err := ParseRotations([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
}

func FuzzParseRotations(f *testing.F) {
	f.Add([]byte("nlp 2\nvision 1\n"))
	f.Add([]byte("# x\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		gens, err := ParseRotations(b)
		if err != nil {
			return
		}
		again, err := ParseRotations(FormatRotations(gens))
		if err != nil || !reflect.DeepEqual(again, gens) {
			t.Fatalf("round trip of %v: %v %v", gens, again, err)
		}
		for a, g := range gens {
			if g < 1 || ValidAccount(a) != nil {
				t.Fatalf("accepted %q %d", a, g)
			}
		}
	})
}

// TestRotate: a rotation raises one account's generation, the sizer's
// RotationFile sees it without a restart, and a broken file refuses every
// account credential until it is fixed.
func TestRotate(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "sizer.token")
	os.WriteFile(tok, []byte("x\n"), 0o600)
	rf := &RotationFile{Path: tok + RotationsSuffix}
	if g := rf.Generation("nlp"); g != 0 || rf.Err() != nil {
		t.Fatalf("no file: generation %d, %v", g, rf.Err())
	}
	for want := 1; want <= 2; want++ {
		g, err := Rotate(tok, "nlp")
		if err != nil || g != want {
			t.Fatalf("rotation %d: %d %v", want, g, err)
		}
		if got := rf.Generation("nlp"); got != want {
			t.Fatalf("after rotation %d the sizer sees %d", want, got)
		}
	}
	if g, _ := Rotate(tok, "vision"); g != 1 || rf.Generation("nlp") != 2 {
		t.Fatalf("rotating vision: %d; nlp now %d", g, rf.Generation("nlp"))
	}
	if st, _ := os.Stat(tok + RotationsSuffix); st.Mode().Perm() != 0o600 {
		t.Errorf("rotations file mode %v, want 0600", st.Mode().Perm())
	}
	os.WriteFile(tok+RotationsSuffix, []byte("nlp two\n"), 0o600)
	if g := rf.Generation("vision"); g != math.MaxInt || rf.Err() == nil {
		t.Fatalf("a broken file: generation %d, err %v; want every credential refused and the error kept", g, rf.Err())
	}
	if _, err := Rotate(tok, "nlp"); err == nil {
		t.Fatal("rotating over a broken file: want an error, not a silent reset")
	}
}
