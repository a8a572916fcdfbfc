// Package iampolicytest reads, for tests, what an IAM policy document of
// internal/iampolicy allows.
package iampolicytest

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/burst-hpc/burst/internal/iampolicy"
)

// ActionsIn lists the distinct actions a policy document allows, sorted.
func ActionsIn(policy []byte) ([]string, error) {
	var doc iampolicy.Document
	if err := json.Unmarshal(policy, &doc); err != nil {
		return nil, fmt.Errorf("parsing IAM policy: %w", err)
	}
	seen := map[string]bool{}
	for _, s := range doc.Statement {
		for _, a := range s.Action {
			seen[a] = true
		}
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}
