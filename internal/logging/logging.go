// Package logging sets up burst's structured logs (log/slog, JSON lines).
// Slurm discards the output of ResumeProgram and SuspendProgram, so those
// programs log to a file; daemons may log to standard error ("-").
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// ParseLevel maps debug, info, warn and error to slog levels.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
}

// Open returns a JSON logger writing to path ("-" or "" for standard error),
// creating the directory and the file (0640) when needed, and a close
// function. Every line carries prog. When the file cannot be opened the
// logger falls back to standard error and says so: losing the log must not
// stop a resume.
func Open(path, level, prog string) (*slog.Logger, func() error) {
	lvl, lerr := ParseLevel(level)
	var w io.Writer = os.Stderr
	closer := func() error { return nil }
	var ferr error
	if path != "" && path != "-" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			ferr = err
		} else if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640); err != nil {
			ferr = err
		} else {
			w, closer = f, f.Close
		}
	}
	l := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})).With("prog", prog, "pid", os.Getpid())
	if ferr != nil {
		l.Error("cannot open log file; logging to stderr", "path", path, "err", ferr)
	}
	if lerr != nil {
		l.Warn("bad log level; using info", "err", lerr)
	}
	return l, closer
}
