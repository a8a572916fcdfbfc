package logging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenWritesJSONLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "burst.log")
	l, closeFn := Open(p, "debug", "burst-resume")
	l.Debug("decided", "job", 7, "offering", "g5.xlarge/us-east-1a/spot")
	closeFn()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(data))), &m); err != nil {
		t.Fatalf("not a JSON line: %q", data)
	}
	if m["prog"] != "burst-resume" || m["job"] != float64(7) || m["level"] != "DEBUG" {
		t.Fatalf("unexpected record %v", m)
	}
}

func TestParseLevel(t *testing.T) {
	if _, err := ParseLevel("loud"); err == nil {
		t.Fatal("want error for unknown level")
	}
	for _, s := range []string{"debug", "INFO", "warn", "error"} {
		if _, err := ParseLevel(s); err != nil {
			t.Fatal(err)
		}
	}
}
