package hostlist

// Test oracles: functions only tests call (no program needs them, so they
// are not production code).

// Count returns how many names Expand(expr) would return, without building
// them. It checks everything Expand checks except that no built name has a
// numeric suffix of 2^64-1 or more (as "n99999999999999999999[1]" would).
func Count(expr string) (int, error) {
	return parse(expr, nil)
}
