package auth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RotationsSuffix: account credential generations live beside the admin
// token, at <token_file>.accounts (0600, like the token).
const RotationsSuffix = ".accounts"

// ParseRotations reads a rotations file: one "<account> <generation>" per
// line (generation a whole number from 1), '#' comments and blank lines
// ignored; an account given twice is an error.
func ParseRotations(b []byte) (map[string]int, error) {
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d %q: want \"<account> <generation>\"", n, line)
		}
		if err := ValidAccount(f[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		g, err := strconv.Atoi(f[1])
		if err != nil || g < 1 || strconv.Itoa(g) != f[1] {
			return nil, fmt.Errorf("line %d: generation %q of account %s: want a whole number from 1", n, f[1], f[0])
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("line %d: account %s given twice", n, f[0])
		}
		out[f[0]] = g
	}
	return out, sc.Err()
}

// FormatRotations writes gens in ParseRotations' form, sorted by account.
func FormatRotations(gens map[string]int) []byte {
	var b bytes.Buffer
	b.WriteString("# account credential generations (burst-sizer token account --rotate); older ones are refused\n")
	names := make([]string, 0, len(gens))
	for a := range gens {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		fmt.Fprintf(&b, "%s %d\n", a, gens[a])
	}
	return b.Bytes()
}

// RotationFile is the sizer's view of a rotations file, re-read when it
// changes. A missing file means no account was rotated; one that cannot be
// read or parsed refuses every account credential (fail closed) until it is
// fixed.
type RotationFile struct {
	Path string

	mu    sync.Mutex
	mod   time.Time
	size  int64
	ino   uint64 // Rotate renames a new file into place
	gens  map[string]int
	err   error
	valid bool
}

// Generation is account's current generation (0: never rotated).
func (f *RotationFile) Generation(account string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		f.gens, f.err, f.valid = nil, nil, false
		return 0
	case err != nil:
		f.err = err
		return math.MaxInt
	}
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	if !f.valid || !st.ModTime().Equal(f.mod) || st.Size() != f.size || ino != f.ino {
		b, err := os.ReadFile(f.Path)
		if err == nil {
			f.gens, err = ParseRotations(b)
		}
		f.err, f.mod, f.size, f.ino, f.valid = err, st.ModTime(), st.Size(), ino, true
	}
	if f.err != nil {
		return math.MaxInt
	}
	return f.gens[account]
}

// Err is the last error reading the file (nil when it is fine or absent).
func (f *RotationFile) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return fmt.Errorf("reading %s: %w (every account credential is refused until it is fixed)", f.Path, f.err)
	}
	return nil
}

// Rotate raises account's generation in the rotations file beside
// tokenFile (written whole, with the token file's owner so the sizer that
// reads the token reads it too, then renamed) and returns the new
// generation.
func Rotate(tokenFile, account string) (int, error) {
	if err := ValidAccount(account); err != nil {
		return 0, err
	}
	path := tokenFile + RotationsSuffix
	gens := map[string]int{}
	if b, err := os.ReadFile(path); err == nil {
		if gens, err = ParseRotations(b); err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	gens[account]++
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, FormatRotations(gens), 0o600); err != nil {
		return 0, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if st, err := os.Stat(tokenFile); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != os.Getuid() || int(sys.Gid) != os.Getgid()) {
			if err := os.Chown(tmp, int(sys.Uid), int(sys.Gid)); err != nil {
				os.Remove(tmp)
				return 0, fmt.Errorf("giving %s the owner of %s: %w", tmp, tokenFile, err)
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return gens[account], nil
}
