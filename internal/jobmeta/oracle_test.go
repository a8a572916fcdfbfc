package jobmeta

import "strings"

// Test oracles: functions only tests call (no program needs them, so they
// are not production code).

// ParseMetadataBody parses key=value pairs without requiring the "burst:"
// prefix (for Slurm's --extra, where the whole string is burst's).
func ParseMetadataBody(s string) (Metadata, []error) {
	if i := strings.Index(s, MetadataPrefix); i >= 0 {
		return parseBody(s, i+len(MetadataPrefix))
	}
	return parseBody(s, 0)
}
