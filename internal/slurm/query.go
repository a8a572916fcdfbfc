package slurm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/burst-hpc/burst/internal/hostlist"
)

// The read side of Scontrol: what it asks each release for (see dialectFor).
//
//	Jobs(ids)      22.05: squeue -h -t all -j IDS -O FIELDS (plain text with per-call markers, see
//	               jobstext.go: 22.05's --json ignores -j and prints every job)
//	               23.02+: squeue --json=v0.0.NN -t all -j IDS
//	Jobs()         squeue --json[=v0.0.NN] -t all
//	JobStates(f)   squeue -h -o '%A|%T|%D|%N|%r' [-j IDS] [-t STATES] [-w NODES] (plain text: every release filters)
//	               with f.Max: --sort=-p,i, and burst stops reading after Max lines
//	Nodes(names)   22.05: scontrol show node -o -d NAMES;  23.02+: scontrol --json=v0.0.NN show node NAMES
//	Nodes()        22.05: sinfo --json;                    23.02+: scontrol --json=v0.0.NN show node

// maxIDsPerCall and maxNamesLen keep each argument well under the kernel's
// 128 KiB per-argument limit.
const (
	maxIDsPerCall = 2000
	maxNamesLen   = 32 << 10
)

// Jobs implements Client.
func (s *Scontrol) Jobs(ctx context.Context, ids ...uint32) ([]Job, error) {
	what := "listing jobs"
	if len(ids) > 0 {
		what = fmt.Sprintf("reading jobs %s", idList(ids, 10))
	}
	d, err := s.dialect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	want := map[uint32]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var calls [][]string
	var marks jobsTextMarks // 22.05, by ID: plain squeue, these markers
	switch {
	case len(ids) == 0 && !d.jobFilter:
		calls = [][]string{{"--json"}} // 22.05: every job, whatever the filters
	case len(ids) == 0:
		calls = [][]string{{d.jsonFlag(), "-t", "all"}}
	default:
		if !d.jobFilter {
			if marks, err = newJobsTextMarks(); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		sorted := slices.Sorted(func(yield func(uint32) bool) {
			for id := range want {
				if !yield(id) {
					return
				}
			}
		})
		for len(sorted) > 0 {
			n := min(len(sorted), maxIDsPerCall)
			if marks.end != "" {
				calls = append(calls, []string{"-h", "-t", "all", "-j", idList(sorted[:n], 0), "-O", marks.format()})
			} else {
				calls = append(calls, []string{d.jsonFlag(), "-t", "all", "-j", idList(sorted[:n], 0)})
			}
			sorted = sorted[n:]
		}
	}
	var jobs []Job
	for _, args := range calls {
		out, err := s.run(ctx, "squeue", args...)
		if err != nil {
			if len(ids) > 0 && errors.Is(err, ErrNotFound) {
				continue // none of these ids is known
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var js []Job
		if marks.end != "" {
			js, err = ParseJobsText(out, marks)
		} else {
			js, err = ParseJobsJSON(out)
		}
		if err != nil {
			return nil, s.parseError(what, "squeue", args, d, err)
		}
		jobs = append(jobs, js...)
	}
	if len(ids) == 0 {
		return jobs, nil
	}
	return slices.DeleteFunc(jobs, func(j Job) bool { return !want[j.ID] }), nil
}

// JobStates implements Client.
func (s *Scontrol) JobStates(ctx context.Context, f JobFilter) ([]JobState, error) {
	what := "reading job states"
	args := []string{"-h", "-o", jobStatesFormat}
	for _, st := range f.States {
		if st == "" || strings.IndexFunc(st, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r == '_') }) >= 0 {
			return nil, fmt.Errorf("%s: state %q: want a state name such as PENDING or RUNNING", what, st)
		}
	}
	switch {
	case len(f.States) > 0:
		args = append(args, "-t", strings.Join(f.States, ","))
	case len(f.IDs) > 0:
		args = append(args, "-t", "all")
	}
	if len(f.Nodes) > 0 {
		hl, err := nodeArg(f.Nodes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		args = append(args, "-w", hl)
	}
	if f.Max < 0 {
		return nil, fmt.Errorf("%s: max %d: want 0 (every job) or a positive count", what, f.Max)
	}
	if f.Max > 0 && len(f.IDs) == 0 {
		// the highest priority first (a held job's is 0), and read no more
		// than asked: the answer stays small however long the queue
		a := append(slices.Clone(args), "--sort=-p,i")
		out, err := s.runHead(ctx, "squeue", f.Max, a...)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, nil
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		js, err := ParseJobStates(out)
		if err != nil {
			return nil, s.parseError(what, "squeue", a, dialect{}, err)
		}
		return js, nil
	}
	var all []JobState
	ids := slices.Clone(f.IDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for first := true; first || len(ids) > 0; first = false {
		a := args
		if len(ids) > 0 {
			n := min(len(ids), maxIDsPerCall)
			a = append(slices.Clone(args), "-j", idList(ids[:n], 0))
			ids = ids[n:]
		}
		out, err := s.run(ctx, "squeue", a...)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		js, err := ParseJobStates(out)
		if err != nil {
			return nil, s.parseError(what, "squeue", a, dialect{}, err)
		}
		all = append(all, js...)
	}
	if f.Max > 0 && len(all) > f.Max {
		all = all[:f.Max]
	}
	return all, nil
}

// Nodes implements Client.
func (s *Scontrol) Nodes(ctx context.Context, names ...string) ([]Node, error) {
	what := "listing nodes"
	if len(names) > 0 {
		what = "reading nodes " + strings.Join(names[:min(len(names), 10)], ",")
		if len(names) > 10 {
			what += fmt.Sprintf(",... (%d)", len(names))
		}
	}
	d, err := s.dialect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var chunks []string
	if len(names) > 0 {
		if err := checkNodeNames(names); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if chunks, err = hostlist.Chunk(names, maxNamesLen); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	var nodes []Node
	read := func(name string, args []string, parse func([]byte) ([]Node, error), notFoundOK bool) error {
		out, err := s.run(ctx, name, args...)
		if err != nil && !(notFoundOK && onlyNotFound(err, out)) {
			return fmt.Errorf("%s: %w", what, err)
		}
		ns, err := parse(out)
		if err != nil {
			return s.parseError(what, name, args, d, err)
		}
		nodes = append(nodes, ns...)
		return nil
	}
	switch {
	case len(names) == 0 && d.nodeJSON:
		err = read("scontrol", []string{d.jsonFlag(), "show", "node"}, ParseNodesJSON, false)
	case len(names) == 0:
		err = read("sinfo", []string{"--json"}, ParseNodesJSON, false)
	default:
		for _, c := range chunks {
			if d.nodeJSON {
				err = read("scontrol", []string{d.jsonFlag(), "show", "node", c}, ParseNodesJSON, false)
			} else {
				err = read("scontrol", []string{"show", "node", "-o", "-d", c}, ParseScontrolNodes, true)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nodes, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	return slices.DeleteFunc(nodes, func(n Node) bool { return !want[n.Name] }), nil
}

// onlyNotFound reports whether a failed `scontrol show node` failed only
// because some names are unknown (22.05 prints "Node x not found" on stdout
// and exits 1, printing the known nodes too).
func onlyNotFound(err error, out []byte) bool {
	var ce *CommandError
	var ee *exec.ExitError
	if !errors.As(err, &ce) || !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return false
	}
	return strings.Contains(string(out)+ce.Stderr, " not found")
}

// parseError wraps a parse failure with the command and release, and logs
// the first one per command and process at error level: burst then runs
// without what it could not read, and the admin must see why.
func (s *Scontrol) parseError(what, name string, args []string, d dialect, err error) error {
	rel := ""
	if !d.version.IsZero() {
		rel = " on Slurm " + d.version.String()
	}
	err = fmt.Errorf("%s: reading the output of %s %s%s: %w", what, s.path(name), strings.Join(args, " "), rel, err)
	parseErrorsLogged.Lock()
	first := !parseErrorsLogged.m[s.path(name)]
	if parseErrorsLogged.m == nil {
		parseErrorsLogged.m = map[string]bool{}
	}
	parseErrorsLogged.m[s.path(name)] = true
	parseErrorsLogged.Unlock()
	if first {
		s.log.Error("burst cannot read Slurm's answer; please report it with the Slurm version (later failures of this command are logged at debug level)", "err", err)
	} else {
		s.log.Debug("burst cannot read Slurm's answer", "err", err)
	}
	return err
}

var parseErrorsLogged struct {
	sync.Mutex
	m map[string]bool
}

// checkNodeNames refuses names that are empty, could be taken for an option
// or hold separators, spaces or control characters.
func checkNodeNames(names []string) error {
	for _, n := range names {
		if n == "" || n[0] == '-' || strings.ContainsFunc(n, func(r rune) bool {
			return r <= ' ' || r == 0x7f || strings.ContainsRune(",[]=\"'\\", r)
		}) {
			return fmt.Errorf("node name %q: want a plain node name (no leading '-', separators, brackets, quotes, spaces or control characters)", n)
		}
	}
	return nil
}

func nodeArg(names []string) (string, error) {
	if err := checkNodeNames(names); err != nil {
		return "", err
	}
	return hostlist.Compress(names)
}

// idList joins ids with commas; with max > 0, at most max of them, then "...".
func idList(ids []uint32, max int) string {
	var b strings.Builder
	for i, id := range ids {
		if max > 0 && i == max {
			fmt.Fprintf(&b, ",... (%d)", len(ids))
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	return b.String()
}
