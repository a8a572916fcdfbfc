package statefile

import "os"

// Test oracles: functions only tests call (no program needs them, so they
// are not production code).

// Append adds data at the end of the file under its lock and fsyncs it.
func Append(path string, perm os.FileMode, data []byte) error {
	return appendData(path, perm, data, false)
}
