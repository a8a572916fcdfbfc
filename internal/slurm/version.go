package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Version is a Slurm release: 24.11.5 is {24, 11, 5}.
type Version struct{ Major, Minor, Micro int }

func (v Version) String() string { return fmt.Sprintf("%02d.%02d.%d", v.Major, v.Minor, v.Micro) }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// IsZero reports whether v is unknown.
func (v Version) IsZero() bool { return v == Version{} }

// ParseVersion reads a Slurm version as `scontrol --version` prints it
// ("slurm 24.11.5", Debian's "slurm-wlm 22.05.8") or as a release string
// ("24.11.5", "25.05.0-0rc1").
func ParseVersion(s string) (Version, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return Version{}, errors.New("parsing Slurm version: empty")
	}
	rel := f[len(f)-1]
	if i := strings.IndexAny(rel, "-+~"); i >= 0 {
		rel = rel[:i]
	}
	parts := strings.Split(rel, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("parsing Slurm version %q: want MAJOR.MINOR[.MICRO], e.g. 24.11.5", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 9999 {
			return Version{}, fmt.Errorf("parsing Slurm version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// The oldest Slurm burst reads: 22.05 (openapi v0.0.38 in squeue/sinfo
// --json, the JSON SLURM_RESUME_FILE).
const minMajor, minMinor = 22, 5

// dialect is how burst talks to one Slurm release through its command-line
// tools: which JSON data parser it pins and which command answers node and
// job queries. One table, dialectFor, maps versions to dialects:
//
//	Slurm        CLI JSON                    pinned          nodes from                    jobs by id
//	22.05        openapi v0.0.38 (fixed)     (none: --json   sinfo --json (all);           squeue --json, all jobs:
//	                                         takes no value) scontrol show node -o NAMES   22.05 ignores -j with --json
//	                                                         (22.05 sinfo --json ignores -n)
//	23.02        data_parser v0.0.39         v0.0.39         scontrol --json show node     squeue --json -j IDS
//	23.11        v0.0.40 (ships 39-40)       v0.0.40         (sinfo --json was reshaped:
//	24.05        v0.0.41 (ships 39-41)       v0.0.41          no per-node records)
//	24.11        v0.0.42 (ships 40-42)       v0.0.42
//	25.05        v0.0.43 (ships 40-43)       v0.0.42
//	25.11        v0.0.44 (ships 41-44)       v0.0.42
//	26.05        v0.0.45 (ships 42-45)       v0.0.42
//	later        -                           v0.0.42; a release without it fails each query with
//	                                         Slurm's "unable to find plugin: data_parser/v0.0.42"
//	                                         and the command line (extend this table)
//
// v0.0.42 is the newest parser that every release from 24.11 to 26.05 ships,
// so one shape serves them all. Checked against the real daemons: 22.05.8
// (Debian 12), 24.11.5 (Debian 13), 26.05.5 (Debian sid); the 23.02-24.05 and
// 25.x rows follow SchedMD's release notes (plugins shipped per release) and
// have not run here.
type dialect struct {
	version Version
	// parser is the pinned data parser ("v0.0.42"); "" on 22.05, whose
	// --json takes no value.
	parser string
	// nodeJSON: `scontrol --json show node [NAMES]` exists (23.02+).
	nodeJSON bool
	// jobFilter: squeue --json honours -j/-t (23.02+; 22.05 prints every job).
	jobFilter bool
}

func dialectFor(v Version) (dialect, error) {
	d := dialect{version: v}
	switch {
	case !v.AtLeast(minMajor, minMinor):
		return d, &VersionError{Version: v}
	case !v.AtLeast(23, 2):
		return d, nil
	case !v.AtLeast(23, 11):
		d.parser = "v0.0.39"
	case !v.AtLeast(24, 5):
		d.parser = "v0.0.40"
	case !v.AtLeast(24, 11):
		d.parser = "v0.0.41"
	default:
		d.parser = "v0.0.42"
	}
	d.nodeJSON, d.jobFilter = true, true
	return d, nil
}

// jsonFlag is the --json option with the pinned parser.
func (d dialect) jsonFlag() string {
	if d.parser == "" {
		return "--json"
	}
	return "--json=" + d.parser
}

// VersionError is returned, by every call, by a client whose Slurm is older
// than burst supports.
type VersionError struct {
	Version Version
	// Bin is the scontrol that reported it.
	Bin string
}

func (e *VersionError) Error() string {
	where := ""
	if e.Bin != "" {
		where = " (" + e.Bin + " --version)"
	}
	return fmt.Sprintf("Slurm %s%s is older than %d.%02d, the oldest release burst reads: its squeue/sinfo JSON "+
		"and SLURM_RESUME_FILE differ; upgrade Slurm to 22.05 or later (tested: 22.05, 24.11, 26.05)",
		e.Version, where, minMajor, minMinor)
}

// detected caches version detection per scontrol binary for the life of the
// process: burst-resume, burst-suspend and the prolog are short-lived, the
// sizer and agent long-lived; either way one `scontrol --version` each.
var detected struct {
	mu sync.Mutex
	m  map[string]*detection
}

type detection struct {
	once  sync.Once
	d     dialect
	err   error
	retry bool // the command failed (missing, timed out): detect again
}

// dialect returns the client's dialect, detecting the version once per
// process (`scontrol --version`: no RPC, a few milliseconds). An
// unsupported version is logged once per process and returned by every call.
func (s *Scontrol) dialect(ctx context.Context) (dialect, error) {
	if !s.version.IsZero() {
		return dialectFor(s.version)
	}
	bin := s.path("scontrol")
	detected.mu.Lock()
	if detected.m == nil {
		detected.m = map[string]*detection{}
	}
	det := detected.m[bin]
	if det == nil {
		det = &detection{}
		detected.m[bin] = det
	}
	detected.mu.Unlock()
	det.once.Do(func() {
		out, err := s.run(ctx, "scontrol", "--version")
		if err != nil {
			det.err, det.retry = fmt.Errorf("detecting the Slurm version: %w", err), true
			return
		}
		v, err := ParseVersion(string(out))
		if err != nil {
			det.err = fmt.Errorf("detecting the Slurm version (%s --version): %w", bin, err)
			s.log.Error("cannot read the Slurm version; every Slurm query fails until burst restarts", "err", det.err)
			return
		}
		det.d, det.err = dialectFor(v)
		var ve *VersionError
		if errors.As(det.err, &ve) {
			ve.Bin = bin
			s.log.Error("unsupported Slurm version; every Slurm query fails", "err", det.err)
			return
		}
		s.log.Info("slurm version", "version", v.String(), "scontrol", bin, "json", det.d.jsonFlag(),
			"nodes_from", map[bool]string{true: "scontrol --json show node", false: "sinfo --json / scontrol show node -o"}[det.d.nodeJSON])
	})
	if det.retry {
		detected.mu.Lock()
		if detected.m[bin] == det {
			delete(detected.m, bin)
		}
		detected.mu.Unlock()
	}
	return det.d, det.err
}

// Version returns the Slurm release of the client's scontrol, detected once
// per process (`scontrol --version`, no daemon needed). An unsupported
// release comes back with a *VersionError.
func (s *Scontrol) Version(ctx context.Context) (Version, error) {
	d, err := s.dialect(ctx)
	return d.version, err
}
