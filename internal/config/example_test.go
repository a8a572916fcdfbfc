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
