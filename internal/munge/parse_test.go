package munge

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the parser")

func TestParseUnmunge(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     Identity
		err      string
	}{
		{"success", "STATUS: Success (0)\nENCODE_HOST: n1 (10.0.0.5)\nUID: alice (1001)\nGID: staff (50)\nLENGTH: 0\n\npayload: ignored\n",
			Identity{Status: "Success", Host: "n1", User: "alice", UID: 1001, Group: "staff", GID: 50}, ""},
		{"numeric", "STATUS: 0\nUID: 7\nGID: 8\n", Identity{UID: 7, GID: 8}, ""},
		{"replayed", "STATUS: Replayed credential (17)\nUID: bob (1002)\nGID: bob (1002)\n",
			Identity{Status: "Replayed credential", StatusCode: 17, User: "bob", UID: 1002, Group: "bob", GID: 1002}, ""},
		{"name with spaces and parens", "STATUS: Success (0)\nUID: we (ird) (3)\nGID: g (4)\n", Identity{Status: "Success", User: "we (ird)", UID: 3, Group: "g", GID: 4}, ""},
		{"unknown keys ignored", "STATUS: Success (0)\nNEW_KEY: x\nUID: a (1)\nGID: a (1)\n", Identity{Status: "Success", User: "a", UID: 1, Group: "a", GID: 1}, ""},
		{"no uid", "STATUS: Success (0)\nGID: a (1)\n", Identity{}, "has no UID"},
		{"empty", "", Identity{}, "has no STATUS, UID, GID"},
		{"twice", "STATUS: Success (0)\nUID: a (1)\nUID: root (0)\nGID: a (1)\n", Identity{}, "UID given twice"},
		{"negative", "STATUS: Success (0)\nUID: a (-1)\nGID: a (1)\n", Identity{}, "want \"name (number)\""},
		{"not a number", "STATUS: Success (0)\nUID: a (x)\nGID: a (1)\n", Identity{}, "UID"},
		{"no colon", "STATUS Success\n", Identity{}, "want KEY: value"},
		{"indented key", " UID: a (1)\n", Identity{}, "want KEY: value"},
		{"error text", "unmunge: Error: Invalid credential version 0\n", Identity{}, "want KEY: value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseUnmunge([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want it to contain %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// TestParseUnmungeGolden reads unmunge's answers captured from MUNGE 0.5.15
// (Debian 12): a success, the same credential decoded again (replayed), and
// --numeric.
func TestParseUnmungeGolden(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.txt")
	if len(paths) < 3 {
		t.Fatalf("want the captured answers in testdata, found %v", paths)
	}
	for _, p := range paths {
		in, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		id, err := ParseUnmunge(in)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got, _ := json.MarshalIndent(id, "", "  ")
		golden := strings.TrimSuffix(p, ".txt") + ".golden.json"
		if *update {
			os.WriteFile(golden, append(got, '\n'), 0o644)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -run Golden -update after checking the parser by hand)", err)
		}
		if strings.TrimSpace(string(want)) != string(got) {
			t.Errorf("%s: got\n%s\nwant\n%s", p, got, want)
		}
	}
}

func FuzzParseUnmunge(f *testing.F) {
	for _, s := range []string{"STATUS: Success (0)\nUID: a (1)\nGID: a (1)\n", "STATUS: 0\nUID: 7\nGID: 8\n", "UID: (1)\n"} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("testdata/success.txt"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		id, err := ParseUnmunge(in)
		if err != nil {
			return
		}
		if id.UID < 0 || id.GID < 0 || id.StatusCode < 0 {
			t.Fatalf("negative ids accepted: %+v", id)
		}
		if strings.ContainsAny(id.User, "\n\x00") {
			t.Fatalf("control character in the user: %q", id.User)
		}
	})
}

func TestCheckCredential(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"MUNGE:AwQFAABFty4heDmpQ3zEcVLZ8PJuu9T5+/=:", true},
		{"MUNGE::", false},
		{"MUNGE:abc", false},
		{"munge:abc:", false},
		{"MUNGE:ab c:", false},
		{"MUNGE:ab\nc:", false},
		{"MUNGE:" + strings.Repeat("A", MaxCredential) + ":", false},
		{"", false},
	} {
		if err := CheckCredential(c.in); (err == nil) != c.ok {
			t.Errorf("CheckCredential(%.40q) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}
