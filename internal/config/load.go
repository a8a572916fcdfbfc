package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/suggest"
)

// DefaultPath is where burst programs look for burst.yaml when neither a
// flag nor BURST_CONFIG names one.
const DefaultPath = "/etc/burst/burst.yaml"

// MaxFileSize bounds burst.yaml: anything larger is a mistake.
const MaxFileSize = 1 << 20

// Problem is one thing wrong with a configuration.
type Problem struct {
	Source string // file name, may be empty
	Line   int    // 0 when unknown
	Path   string // YAML path, e.g. classes[1].max_nodes
	Msg    string // what is wrong and how to fix it
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Source != "" {
		b.WriteString(p.Source)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a configuration. It is an error.
type Problems []Problem

func (ps Problems) Error() string {
	shown := ps
	if len(shown) > MaxShownProblems {
		shown = shown[:MaxShownProblems]
	}
	lines := make([]string, len(shown))
	for i, p := range shown {
		lines[i] = p.String()
	}
	if len(ps) == 1 {
		return "invalid configuration: " + lines[0]
	}
	if rest := len(ps) - len(shown); rest > 0 {
		lines = append(lines, fmt.Sprintf("... and %d more problem(s) (fix these first)", rest))
	}
	return fmt.Sprintf("invalid configuration (%d problems):\n  %s", len(ps), strings.Join(lines, "\n  "))
}

// MaxShownProblems is how many problems an error message lists; the rest
// are counted.
const MaxShownProblems = 10

// IsInvalid reports whether err is (or wraps) configuration problems, for
// mapping to exit status 2.
func IsInvalid(err error) bool {
	var ps Problems
	return errors.As(err, &ps)
}

// Resolve picks the configuration file: the flag value, then BURST_CONFIG,
// then burst.yaml beside $SLURM_CONF (Slurm starts ResumeProgram and
// SuspendProgram with no arguments but the node list and with SLURM_CONF
// set), then DefaultPath; getenv reads the environment (os.Getenv).
func Resolve(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if p := getenv("BURST_CONFIG"); p != "" {
		return p
	}
	if sc := getenv("SLURM_CONF"); sc != "" {
		p := filepath.Join(filepath.Dir(sc), "burst.yaml")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return DefaultPath
}

// Load reads, parses, applies environment overrides to and validates a
// burst.yaml. Configuration problems come back as Problems.
func Load(path string) (*Config, error) { return LoadEnv(path, os.LookupEnv) }

// LoadEnv is Load taking the environment overrides (ApplyEnv) from lookup.
func LoadEnv(path string, lookup func(string) (string, bool)) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading configuration %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, Problems{{Source: path, Msg: fmt.Sprintf("file is larger than %d bytes; is this really burst.yaml?", MaxFileSize)}}
	}
	cfg, probs := parse(data, path)
	if cfg == nil {
		return nil, probs
	}
	cfg.ApplyEnv(lookup)
	if err := cfg.Validate(); err != nil {
		bad := map[string]bool{}
		for _, p := range probs {
			bad[p.Path] = true
		}
		for _, p := range err.(Problems) {
			if !bad[p.Path] { // a field that failed to decode is reported once
				probs = append(probs, p)
			}
		}
	}
	if len(probs) > 0 {
		sortProblems(probs)
		return nil, probs
	}
	return cfg, nil
}

// Parse decodes YAML over Default() strictly: unknown keys and wrong types
// are reported with path and line, all at once. It does not validate.
func Parse(data []byte, source string) (*Config, error) {
	cfg, probs := parse(data, source)
	if len(probs) > 0 {
		return nil, probs
	}
	return cfg, nil
}

// parse returns the configuration decoded as far as possible along with the
// problems found, so Load can report decoding and validation problems at once.
func parse(data []byte, source string) (*Config, Problems) {
	cfg := Default()
	cfg.Source = source
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Problems{{Source: source, Msg: "file is empty; start from examples/burst.yaml"}}
		}
		return nil, Problems{{Source: source, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Problems{{Source: source, Line: extra.Line, Msg: "more than one YAML document; burst.yaml holds exactly one"}}
	}
	cfg.lines = map[string]int{}
	var probs Problems
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	walk(doc, reflect.TypeOf(*cfg), "", source, cfg.lines, &probs)
	// unknown keys were reported by walk; decode the rest leniently so
	// validation can still report everything else in the same run
	if err := doc.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, append(probs, Problem{Source: source, Msg: err.Error()})
		}
		for _, m := range te.Errors {
			probs = append(probs, typeProblem(m, source, cfg.lines))
		}
	}
	return cfg, probs
}

var lineRe = regexp.MustCompile(`^line (\d+): (.*)$`)

// typeProblem turns a yaml.v3 type error ("line 7: cannot unmarshal !!str
// `x` into int") into a Problem with the YAML path of that line.
func typeProblem(msg, source string, lines map[string]int) Problem {
	p := Problem{Source: source, Msg: msg}
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Msg = m[2]
		for path, l := range lines {
			if l == p.Line && (p.Path == "" || len(path) > len(p.Path)) {
				p.Path = path
			}
		}
	}
	p.Msg = strings.NewReplacer("!!str", "a string", "!!int", "a number", "!!seq", "a list", "!!map", "a mapping",
		"!!bool", "true/false", "!!float", "a number").Replace(p.Msg)
	if strings.Contains(p.Msg, "cannot unmarshal") {
		p.Msg = "wrong type: " + p.Msg
	}
	return p
}

var durationType = reflect.TypeOf(Duration{})

// walk records the line of every path and reports keys the schema does not
// know, naming the keys it does.
func walk(n *yaml.Node, t reflect.Type, path, source string, lines map[string]int, probs *Problems) {
	if n == nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		if _, ok := lines[path]; !ok {
			lines[path] = n.Line
		}
	}
	if t == durationType {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return
			}
			*probs = append(*probs, Problem{Source: source, Line: n.Line, Path: path, Msg: "wrong type: want a mapping of keys (" + strings.Join(knownKeys(t), ", ") + ")"})
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("unknown key %q; known keys here: %s", k.Value, strings.Join(knownKeys(t), ", "))
				if s := suggest.Closest(k.Value, knownKeys(t)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				*probs = append(*probs, Problem{Source: source, Line: k.Line, Path: kp, Msg: msg})
				continue
			}
			if seen[k.Value] {
				*probs = append(*probs, Problem{Source: source, Line: k.Line, Path: kp, Msg: "key given twice; keep one"})
			}
			seen[k.Value] = true
			lines[kp] = k.Line
			walk(v, ft, kp, source, lines, probs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return // the strict decoder reports the type
		}
		for i, c := range n.Content {
			walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), source, lines, probs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kp := join(path, n.Content[i].Value)
			lines[kp] = n.Content[i].Line
			walk(n.Content[i+1], t.Elem(), kp, source, lines, probs)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// the decoder would truncate 3.5 to 3
		if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
			*probs = append(*probs, Problem{Source: source, Line: n.Line, Path: path, Msg: fmt.Sprintf("%s is not a whole number; give an integer like 4", n.Value)})
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func knownKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ApplyEnv applies BURST_* environment overrides (lookup is os.LookupEnv in
// programs). They exist for the settings a packaged install varies most.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) {
	set := func(key string, dst *string) {
		if v, ok := lookup(key); ok && v != "" {
			*dst = v
		}
	}
	set("BURST_LOG_FILE", &c.Log.File)
	set("BURST_LOG_LEVEL", &c.Log.Level)
	set("BURST_STATE_DIR", &c.Sizer.StateDir)
	set("BURST_SIZER_URL", &c.Sizer.URL)
	set("BURST_EC2_ENDPOINT", &c.Cluster.EC2Endpoint)
}

// sortProblems orders problems by line, those without a line last.
func sortProblems(ps Problems) {
	sort.SliceStable(ps, func(i, j int) bool {
		li, lj := ps[i].Line, ps[j].Line
		if li == 0 || lj == 0 {
			return li != 0 && lj == 0
		}
		return li < lj
	})
}
