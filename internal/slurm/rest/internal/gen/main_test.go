package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedUpToDate regenerates every client into a temporary
// directory, as `go generate ./internal/slurm/rest` would, and compares it
// with the committed code: a spec, an overlay or the generator changed
// without regenerating fails here.
func TestGeneratedUpToDate(t *testing.T) {
	out := t.TempDir()
	if err := Run("../..", out); err != nil {
		t.Fatal(err)
	}
	for _, tg := range Targets {
		rel := filepath.Join(tg.Package, OutFile)
		got, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("../..", rel))
		if err != nil {
			t.Fatalf("%v (run go generate ./internal/slurm/rest)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/slurm/rest/%s is not what the generator makes of openapi/%s and its overlay (%s); run go generate ./internal/slurm/rest",
				rel, tg.Spec, firstDiff(want, got))
		}
	}
	// every generated package is a target: none is left from an old one
	if found, _ := filepath.Glob(filepath.Join("../..", "*", OutFile)); len(found) != len(Targets) {
		t.Errorf("found %d generated packages %v, want the %d of Targets", len(found), found, len(Targets))
	}
}

// TestOverlaysApplied: the fixes reach the generated code.
func TestOverlaysApplied(t *testing.T) {
	for _, c := range []struct{ pkg, want string }{
		{"v0038", "Major *int `json:\"major,omitempty\"`"},
		{"v0042", "Number *int64 `json:\"number,omitempty\"`"},
		{"v0045", "Number *int64 `json:\"number,omitempty\"`"},
	} {
		b, err := os.ReadFile(filepath.Join("../..", c.pkg, OutFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(c.want)) {
			t.Errorf("%s: no %q", c.pkg, c.want)
		}
		if bytes.Contains(b, []byte(" int32")) || bytes.Contains(b, []byte("*int32")) {
			t.Errorf("%s still has int32 fields", c.pkg)
		}
		if bytes.Contains(b, []byte("yaml.Unmarshal")) || bytes.Contains(b, []byte("YAML")) {
			t.Errorf("%s still handles YAML", c.pkg)
		}
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: committed %.100q, generated %.100q", i+1, x, y)
		}
	}
	return "same lines, different bytes"
}
