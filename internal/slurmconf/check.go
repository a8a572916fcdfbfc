package slurmconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Entry is one line of slurm.conf: a global Key=Value, or a NodeName /
// PartitionName line with its attributes.
type Entry struct {
	File  string
	Line  int
	Key   string            // as written, e.g. SlurmctldParameters, NodeName
	Value string            // the value of Key
	Attrs map[string]string // lower-case attribute -> value, for NodeName/PartitionName lines
}

// Parse splits slurm.conf text into entries and the Include targets it names.
// Keys are case-insensitive in Slurm; Entry keeps them as written.
func Parse(data []byte, file string) (entries []Entry, includes []string, err error) {
	for i, raw := range strings.Split(string(data), "\n") {
		line := raw
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		if strings.EqualFold(fields[0], "include") {
			if len(fields) != 2 {
				return nil, nil, fmt.Errorf("%s:%d: Include takes one path", file, i+1)
			}
			includes = append(includes, fields[1])
			continue
		}
		k, v, ok := strings.Cut(fields[0], "=")
		if !ok || k == "" {
			return nil, nil, fmt.Errorf("%s:%d: %q is not Key=Value", file, i+1, fields[0])
		}
		e := Entry{File: file, Line: i + 1, Key: k, Value: v}
		lk := strings.ToLower(k)
		if lk == "nodename" || lk == "partitionname" || lk == "nodeset" || lk == "downnodes" || lk == "frontendname" {
			e.Attrs = map[string]string{}
			for _, f := range fields[1:] {
				ak, av, ok := strings.Cut(f, "=")
				if !ok {
					return nil, nil, fmt.Errorf("%s:%d: %q is not Key=Value", file, i+1, f)
				}
				e.Attrs[strings.ToLower(ak)] = av
			}
		} else if len(fields) > 1 {
			return nil, nil, fmt.Errorf("%s:%d: one Key=Value per line for %s", file, i+1, k)
		}
		entries = append(entries, e)
	}
	return entries, includes, nil
}

// LoadFile parses a slurm.conf and every file it includes (relative paths
// are relative to its directory), in order.
func LoadFile(path string) ([]Entry, error) {
	return load(path, filepath.Dir(path), 0)
}

func load(path, dir string, depth int) ([]Entry, error) {
	if depth > 8 {
		return nil, fmt.Errorf("reading %s: Include nested more than 8 deep", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading slurm configuration: %w", err)
	}
	es, incs, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	for _, inc := range incs {
		if !filepath.IsAbs(inc) {
			inc = filepath.Join(dir, inc)
		}
		more, err := load(inc, dir, depth+1)
		if err != nil {
			return nil, err
		}
		es = append(es, more...)
	}
	return es, nil
}

// Difference is one way an existing configuration falls short of the plan.
type Difference struct {
	Where string // file:line of the existing setting, or "" when missing
	What  string
}

func (d Difference) String() string {
	if d.Where == "" {
		return d.What
	}
	return d.Where + ": " + d.What
}

// Check compares existing slurm.conf entries with the plan. The last
// occurrence of a global key wins, as in Slurm.
func (p *Plan) Check(entries []Entry) []Difference {
	global := map[string]Entry{}
	nodes := map[string]Entry{}
	parts := map[string]Entry{}
	for _, e := range entries {
		switch strings.ToLower(e.Key) {
		case "nodename":
			nodes[e.Value] = e
		case "partitionname":
			parts[e.Value] = e
		default:
			global[strings.ToLower(e.Key)] = e
		}
	}
	var out []Difference
	where := func(e Entry) string { return fmt.Sprintf("%s:%d", e.File, e.Line) }
	for _, s := range p.Settings {
		e, ok := global[strings.ToLower(s.Key)]
		switch {
		case !ok:
			out = append(out, Difference{"", fmt.Sprintf("%s is not set; burst needs %s=%s", s.Key, s.Key, s.Value)})
		case !sameValue(s.Key, e.Value, s.Value):
			out = append(out, Difference{where(e), fmt.Sprintf("%s=%s, burst needs %s", e.Key, e.Value, s.Value)})
		}
	}
	for _, n := range p.Nodes {
		e, ok := nodes[n.Names]
		if !ok {
			out = append(out, Difference{"", fmt.Sprintf("NodeName=%s (class %s) is not defined", n.Names, n.Class)})
			continue
		}
		for _, a := range n.attrs() {
			if got := e.Attrs[strings.ToLower(a[0])]; !strings.EqualFold(got, a[1]) {
				out = append(out, Difference{where(e), fmt.Sprintf("NodeName=%s has %s=%s, burst needs %s", n.Names, a[0], got, a[1])})
			}
		}
	}
	for _, pl := range p.Partitions {
		e, ok := parts[pl.Name]
		if !ok {
			out = append(out, Difference{"", fmt.Sprintf("PartitionName=%s is not defined", pl.Name)})
			continue
		}
		have := map[string]bool{}
		for _, n := range strings.Split(e.Attrs["nodes"], ",") {
			have[n] = true
		}
		// a hostlist with brackets contains commas: compare on the joined text too
		for _, n := range pl.Nodes {
			if !have[n] && !strings.Contains(e.Attrs["nodes"], n) {
				out = append(out, Difference{where(e), fmt.Sprintf("PartitionName=%s does not include burst's nodes %s", pl.Name, n)})
			}
		}
	}
	return out
}

// sameValue compares setting values; SlurmctldParameters and
// SchedulerParameters are sets of options, so burst's options must all be
// present.
func sameValue(key, have, want string) bool {
	if strings.EqualFold(key, "SlurmctldParameters") || strings.EqualFold(key, "SchedulerParameters") {
		opts := map[string]bool{}
		for _, o := range strings.Split(have, ",") {
			opts[strings.TrimSpace(o)] = true
		}
		for _, o := range strings.Split(want, ",") {
			if !opts[o] {
				return false
			}
		}
		return true
	}
	return have == want
}
