// Package awsmodel checks the EC2 emulator's responses against AWS's own
// API models: botocore's service-2.json files (the machine-readable
// service definitions the AWS SDKs are generated from), found in the
// Python that holds botocore. A response is walked against its operation's
// output shape: every element (EC2's XML, the ec2 query protocol) or key
// (SQS's JSON, awsJson1_0) must be a member of its structure, required
// members must be there, enum values must be in the enum, and scalars must
// parse as their type (integer, long, boolean, double, float, timestamp,
// blob). Test only: the emulator runs it when its Options.Models is set
// (test/stack sets it in every e2e test).
package awsmodel

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Model is one service's API model.
type Model struct {
	Service    string // endpoint prefix, e.g. ec2, sqs
	Protocol   string // ec2, query, json
	Operations map[string]Operation
	Shapes     map[string]*Shape
	Source     string // the file it was read from
}

// Operation names an operation's output shape ("" when it has none).
type Operation struct {
	Output string
}

// Shape is a botocore shape: a structure, list, map or scalar.
type Shape struct {
	Type      string            `json:"type"`
	Members   map[string]Member `json:"members"`
	Required  []string          `json:"required"`
	Enum      []string          `json:"enum"`
	Member    *Member           `json:"member"` // list
	Key       *Member           `json:"key"`    // map
	Value     *Member           `json:"value"`  // map
	Flattened bool              `json:"flattened"`
}

// Member is a reference to a shape with its wire name.
type Member struct {
	Shape        string `json:"shape"`
	LocationName string `json:"locationName"`
	Flattened    bool   `json:"flattened"`
}

type rawModel struct {
	Metadata struct {
		Protocol       string `json:"protocol"`
		EndpointPrefix string `json:"endpointPrefix"`
	} `json:"metadata"`
	Operations map[string]struct {
		Output *struct {
			Shape string `json:"shape"`
		} `json:"output"`
	} `json:"operations"`
	Shapes map[string]*Shape `json:"shapes"`
}

// Parse reads a service-2.json document.
func Parse(b []byte, source string) (*Model, error) {
	var raw rawModel
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parsing the API model %s: %w", source, err)
	}
	if raw.Metadata.Protocol == "" || len(raw.Shapes) == 0 {
		return nil, fmt.Errorf("parsing the API model %s: no protocol or no shapes; not a botocore service-2.json", source)
	}
	m := &Model{Service: raw.Metadata.EndpointPrefix, Protocol: raw.Metadata.Protocol, Operations: map[string]Operation{}, Shapes: raw.Shapes, Source: source}
	for name, op := range raw.Operations {
		o := Operation{}
		if op.Output != nil {
			o.Output = op.Output.Shape
			if m.Shapes[o.Output] == nil {
				return nil, fmt.Errorf("parsing the API model %s: operation %s's output shape %s is not defined", source, name, o.Output)
			}
		}
		m.Operations[name] = o
	}
	return m, nil
}

// Load reads a service-2.json or service-2.json.gz file.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the API model: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("reading the API model %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the API model %s: %w", path, err)
	}
	return Parse(b, path)
}

// Python is the interpreter that holds botocore: $BURST_PYTHON, else
// python3 on PATH.
func Python() string {
	if p := os.Getenv("BURST_PYTHON"); p != "" {
		return p
	}
	return "python3"
}

// Find returns the newest service-2.json(.gz) of service in the botocore
// that Python() imports.
func Find(service string) (string, error) {
	out, err := exec.Command(Python(), "-c", "import botocore, os; print(os.path.dirname(botocore.__file__))").Output()
	if err != nil {
		return "", fmt.Errorf("finding botocore (%s -c 'import botocore'): %w; the API models come with botocore (pip install botocore, or the machine image's Python)", Python(), err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "data", service)
	versions, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("finding botocore's %s model: %w", service, err)
	}
	var names []string
	for _, v := range versions {
		if v.IsDir() {
			names = append(names, v.Name())
		}
	}
	sort.Strings(names) // API versions are dates
	for i := len(names) - 1; i >= 0; i-- {
		for _, f := range []string{"service-2.json.gz", "service-2.json"} {
			p := filepath.Join(dir, names[i], f)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("finding botocore's %s model: no service-2.json under %s", service, dir)
}

// Set holds the models the emulator's responses are checked against.
type Set struct {
	EC2, SQS *Model
}

var (
	defaultOnce sync.Once
	defaultSet  *Set
	defaultErr  error
)

// Default loads botocore's EC2 and SQS models once per process.
func Default() (*Set, error) {
	defaultOnce.Do(func() {
		s := &Set{}
		for _, x := range []struct {
			name string
			m    **Model
		}{{"ec2", &s.EC2}, {"sqs", &s.SQS}} {
			p, err := Find(x.name)
			if err != nil {
				defaultErr = err
				return
			}
			if *x.m, err = Load(p); err != nil {
				defaultErr = err
				return
			}
		}
		defaultSet = s
	})
	return defaultSet, defaultErr
}

// Check checks a successful response body of service ("ec2" or "sqs") to
// action.
func (s *Set) Check(service, action string, body []byte) []Violation {
	switch service {
	case "ec2":
		return s.EC2.Check(action, body)
	case "sqs":
		return s.SQS.Check(action, body)
	}
	return []Violation{{Op: action, Problem: "unknown service " + service}}
}

// Violation is one way a response breaks the model.
type Violation struct {
	Op      string // operation
	Path    string // member path, e.g. CreateFleetResult.Instances[0].InstanceIds[1]
	Problem string
}

func (v Violation) String() string {
	if v.Path == "" {
		return fmt.Sprintf("%s: %s", v.Op, v.Problem)
	}
	return fmt.Sprintf("%s: %s: %s", v.Op, v.Path, v.Problem)
}

// Check checks a successful response body of op against the model.
func (m *Model) Check(op string, body []byte) []Violation {
	o, ok := m.Operations[op]
	if !ok {
		return []Violation{{Op: op, Problem: fmt.Sprintf("%s has no operation %s (%s)", m.Service, op, m.Source)}}
	}
	c := &checker{m: m, op: op}
	switch m.Protocol {
	case "ec2":
		c.ec2Response(o.Output, body)
	case "json":
		c.jsonResponse(o.Output, body)
	default:
		c.add("", "protocol %q is not one this checker reads (ec2, json)", m.Protocol)
	}
	return c.out
}

type checker struct {
	m   *Model
	op  string
	out []Violation
}

func (c *checker) add(path, format string, a ...any) {
	c.out = append(c.out, Violation{Op: c.op, Path: path, Problem: fmt.Sprintf(format, a...)})
}

// shape looks a member's shape up; nil (and a violation) for a broken model.
func (c *checker) shape(path, name string) *Shape {
	sh := c.m.Shapes[name]
	if sh == nil {
		c.add(path, "the model has no shape %s", name)
	}
	return sh
}

func (c *checker) enum(path string, sh *Shape, v string) {
	if len(sh.Enum) > 0 && !contains(sh.Enum, v) {
		c.add(path, "%q is not one of the enum's %d values (%s)", v, len(sh.Enum), clip(strings.Join(sh.Enum, ", ")))
	}
}

func contains(xs []string, v string) bool {
	for _, x := range xs {
		if x == v {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
