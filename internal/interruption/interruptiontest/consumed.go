// Package interruptiontest reads, for tests, what internal/interruption
// leaves in a job's AdminComment once the epilog used its requeue note.
package interruptiontest

import (
	"strings"

	"github.com/burst-hpc/burst/internal/interruption"
)

// ParseConsumed reads a note the epilog used (interruption.Note.Consumed),
// with the nodes it held for the relaunch.
func ParseConsumed(s string) (n interruption.Note, held []string, ok bool) {
	rest, found := strings.CutPrefix(s, interruption.ConsumedPrefix)
	if !found {
		return interruption.Note{}, nil, false
	}
	if i := strings.LastIndex(rest, "; held "); i >= 0 && strings.HasSuffix(rest, " for the relaunch") {
		held = strings.Split(strings.TrimSuffix(rest[i+len("; held "):], " for the relaunch"), ",")
		rest = rest[:i]
	}
	n, ok = interruption.ParseNote(interruption.NotePrefix + rest)
	if !ok {
		return interruption.Note{}, nil, false
	}
	return n, held, true
}
