package cmd

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/burst-hpc/burst/internal/cmdline/cmdlinetest"
)

// docFiles are the Markdown files whose commands are checked.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob("../../docs/*.md")
	paths = append(paths, "../../README.md", "../README.md")
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

// TestDocumentedCommandsExist: every `burst-sizer ...` command line in the
// README and docs names subcommands and flags the program has.
func TestDocumentedCommandsExist(t *testing.T) {
	n := 0
	for p, text := range docFiles(t) {
		for _, words := range cmdlinetest.DocCommands(text, "burst-sizer") {
			n++
			if err := cmdlinetest.CheckDocCommand(App(io.Discard, io.Discard), words); err != nil {
				t.Errorf("%s: `burst-sizer %v`: %v", p, words, err)
			}
		}
	}
	if n < 10 {
		t.Errorf("found only %d burst-sizer commands in the docs; is the extraction broken?", n)
	}
}
