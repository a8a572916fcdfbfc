package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// keepResumeFiles is how many resume-file copies the state directory keeps.
const keepResumeFiles = 200

// keepCopy saves the resume file in <stateDir>/resume-files for debugging
// (Slurm removes its own copy), keeping the newest keepResumeFiles.
func keepCopy(stateDir string, raw []byte, log *slog.Logger) {
	dir := filepath.Join(stateDir, "resume-files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Warn("keeping a copy of the resume file", "err", err)
		return
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.json", time.Now().UTC().Format("20060102T150405.000"), os.Getpid()))
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		log.Warn("keeping a copy of the resume file", "err", err)
	}
	// names sort by time: drop the oldest beyond the limit
	if old, err := filepath.Glob(filepath.Join(dir, "*.json")); err == nil && len(old) > keepResumeFiles {
		sort.Strings(old)
		for _, f := range old[:len(old)-keepResumeFiles] {
			os.Remove(f)
		}
	}
}
