package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/burst-hpc/burst/internal/cmdline"
)

// writeAll writes every file into dir or none: each goes to a temporary
// file beside its target first, and only when all of them are written and
// synced are they renamed into place (a failure removes the temporaries,
// leaving the old files as they were). dir must exist: a mistyped --out is
// refused, never created. It returns the paths written, sorted.
func writeAll(dir string, files map[string][]byte) ([]string, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, cmdline.Usagef("--out %s: no such directory (create it first, or correct the path)", dir)
	case err != nil:
		return nil, fmt.Errorf("--out %s: %w", dir, err)
	case !fi.IsDir():
		return nil, cmdline.Usagef("--out %s: not a directory", dir)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	tmps := map[string]string{}
	cleanup := func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	for _, n := range names {
		f, err := os.CreateTemp(dir, "."+n+".tmp-*")
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("writing %s: %w (nothing was changed)", filepath.Join(dir, n), err)
		}
		tmps[n] = f.Name()
		_, err = f.Write(files[n])
		if err == nil {
			err = f.Chmod(0o644)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("writing %s: %w (nothing was changed)", filepath.Join(dir, n), err)
		}
	}
	// what would stop a rename (a directory in a file's place) is found
	// before the first one
	for _, n := range names {
		p := filepath.Join(dir, n)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			cleanup()
			return nil, fmt.Errorf("writing %s: a directory is in its place (nothing was changed)", p)
		}
	}
	var out []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.Rename(tmps[n], p); err != nil {
			cleanup()
			return out, fmt.Errorf("renaming into %s: %w (written before it: %v)", p, err, out)
		}
		delete(tmps, n)
		out = append(out, p)
	}
	return out, nil
}
