// Package version is the burst release a binary was built from, stamped at
// build time by the Makefile:
//
//	go build -ldflags "-X github.com/burst-hpc/burst/internal/version.Version=$(VERSION)"
//
// with VERSION from `git describe --tags --always --dirty` (or "dev"). A
// binary built without the stamp (go run, go test) reports "dev".
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release, e.g. v0.4.1, v0.4.1-3-gabc1234-dirty or dev.
var Version = "dev"

// Commit is the VCS revision the binary was built from, when the Go
// toolchain recorded it (a build inside the git tree); "" otherwise.
var Commit = vcsRevision()

func vcsRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// String is the one line every program prints for --version and version:
// "<prog> <version> (commit <rev>, <go version>)".
func String(prog string) string {
	s := prog + " " + Version + " ("
	if Commit != "" {
		c := Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += "commit " + c + ", "
	}
	return s + runtime.Version() + ")"
}

// Same reports whether two version strings name the same build; "" (a
// peer that did not say) is never a mismatch.
func Same(a, b string) bool { return a == "" || b == "" || a == b }
