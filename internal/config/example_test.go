package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestExampleCommentsEveryKey walks Config's yaml tags (reflection) and
// examples/burst.yaml side by side: every key of the struct appears in the
// example, with a comment (above it or on its line), as README promises.
// A key of a list's elements counts when any element has it; a map's keys
// are the site's own; an optional key may be shown commented out
// ("# key: value  # what it does").
func TestExampleCommentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../examples/burst.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	all, present, commented := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var order []string
	unmarshaler := reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	var walk func(typ reflect.Type, n *yaml.Node, path string)
	walk = func(typ reflect.Type, n *yaml.Node, path string) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch {
		case reflect.PointerTo(typ).Implements(unmarshaler):
			return // a scalar with its own syntax (Duration)
		case typ.Kind() == reflect.Slice:
			walk(typ.Elem(), nil, path+"[]")
			if n != nil && n.Kind == yaml.SequenceNode {
				for _, el := range n.Content {
					walk(typ.Elem(), el, path+"[]")
				}
			}
			return
		case typ.Kind() != reflect.Struct:
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !f.IsExported() || tag == "-" || tag == "" {
				continue
			}
			p := strings.TrimPrefix(path+"."+tag, ".")
			if !all[p] {
				all[p] = true
				order = append(order, p)
			}
			var key, val *yaml.Node
			if n != nil && n.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(n.Content); j += 2 {
					if n.Content[j].Value == tag {
						key, val = n.Content[j], n.Content[j+1]
					}
				}
			}
			if key == nil {
				walk(f.Type, nil, p)
				continue
			}
			present[p] = true
			if key.HeadComment != "" || key.LineComment != "" || val.LineComment != "" || val.HeadComment != "" {
				commented[p] = true
			}
			walk(f.Type, val, p)
		}
	}
	walk(reflect.TypeOf(Config{}), doc.Content[0], "")
	// an optional key may be shown commented out, with its explanation:
	// "  # key: value   # what it does"
	lines := strings.Split(string(b), "\n")
	commentedOut := func(p string) bool {
		tag := p[strings.LastIndex(p, ".")+1:]
		tag = strings.TrimSuffix(tag, "[]")
		for i, l := range lines {
			t := strings.TrimSpace(l)
			if !strings.HasPrefix(t, "#") {
				continue
			}
			rest, ok := strings.CutPrefix(strings.TrimSpace(t[1:]), tag+":")
			if ok && (strings.Contains(rest, "#") || (i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#"))) {
				return true
			}
		}
		return false
	}
	var missing, bare []string
	for _, p := range order {
		switch {
		case !present[p] && !commentedOut(p):
			missing = append(missing, p)
		case present[p] && !commented[p]:
			bare = append(bare, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("examples/burst.yaml lacks %d key(s) of the config: %s", len(missing), strings.Join(missing, ", "))
	}
	if len(bare) > 0 {
		t.Errorf("examples/burst.yaml has %d key(s) without a comment: %s", len(bare), strings.Join(bare, ", "))
	}
}

// TestProblemsShowTen: a file with many problems lists ten, then a count.
func TestProblemsShowTen(t *testing.T) {
	var ps Problems
	for i := 0; i < 1200; i++ {
		ps = append(ps, Problem{Path: "classes[0].name", Msg: "required"})
	}
	msg := ps.Error()
	if n := strings.Count(msg, "classes[0].name"); n != MaxShownProblems {
		t.Errorf("%d problems printed, want %d", n, MaxShownProblems)
	}
	if !strings.Contains(msg, "(1200 problems)") || !strings.Contains(msg, "and 1190 more problem(s)") {
		t.Errorf("no count of the rest:\n%s", msg)
	}
}

// TestNumbersValidated: values YAML accepts but burst must not: each is a
// problem naming its path.
func TestNumbersValidated(t *testing.T) {
	b, err := os.ReadFile("../../examples/burst.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, path, want string }{
		{"monthly_usd: 20000", "monthly_usd: .nan", "budgets[0].monthly_usd", "not a finite number"},
		{"monthly_usd: 8000", "monthly_usd: .inf", "budgets[1].monthly_usd", "not a finite number"},
		{"max_nodes: 32                # Slurm", "max_nodes: 3.5              # Slurm", "classes[0].max_nodes", ""},
		{"listen: 0.0.0.0:8472", "listen: 0.0.0.0:99999", "sizer.listen", "port \"99999\""},
		{"url: https://10.0.0.10:8472", "url: https://10.0.0.10:99999", "sizer.url", "port \"99999\""},
		{"us-east-1a: subnet-0aaaaaaaaaaaaaaaa", "us-east-1a: subnet-0aa aa", "network.subnets.us-east-1a", "not a subnet ID"},
		{"security_groups: [sg-0123456789abcdef0]", "security_groups: [sg-XYZ]", "network.security_groups[0]", "not a security group ID"},
	} {
		y := strings.Replace(string(b), c.from, c.to, 1)
		if y == string(b) {
			t.Fatalf("%q not in the example", c.from)
		}
		cfg, err := Parse([]byte(y), "burst.yaml")
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a problem at %s (%s)", c.to, err, c.path, c.want)
		}
	}
}
