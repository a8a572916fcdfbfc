package interruption

import (
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CheckpointDir is $BURST_CHECKPOINT_DIR of job id under root.
func CheckpointDir(root string, id uint32) string {
	return filepath.Join(root, strconv.FormatUint(uint64(id), 10))
}

// MarkerPath is the file a job creates once it checkpointed in answer to
// the signal, in restart restartCount.
func MarkerPath(checkpointDir string, restartCount uint32) string {
	return filepath.Join(checkpointDir, ".checkpointed-"+strconv.FormatUint(uint64(restartCount), 10))
}

// MarkerWritten reports whether marker is a regular file last written at or
// after since. It only looks (lstat: a symlink is not a marker); burst
// never writes or removes anything in a job's directory.
func MarkerWritten(marker string, since time.Time) bool {
	fi, err := os.Lstat(marker)
	return err == nil && fi.Mode().IsRegular() && !fi.ModTime().Before(since)
}
