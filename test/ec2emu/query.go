package ec2emu

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// query reads EC2 Query parameters ("Filter.1.Value.2=...").
type query struct {
	v      url.Values
	prefix string
}

func (q query) get(key string) string { return q.v.Get(q.prefix + key) }

func (q query) has(key string) bool {
	_, ok := q.v[q.prefix+key]
	return ok
}

func (q query) sub(key string) query { return query{q.v, q.prefix + key + "."} }

// list returns the numbered members of key (key.1, key.2, ...), in order.
func (q query) list(key string) []query {
	p := q.prefix + key + "."
	seen := map[int]bool{}
	for k := range q.v {
		if !strings.HasPrefix(k, p) {
			continue
		}
		rest := k[len(p):]
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[:i]
		}
		if n, err := strconv.Atoi(rest); err == nil {
			seen[n] = true
		}
	}
	idx := make([]int, 0, len(seen))
	for n := range seen {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	out := make([]query, len(idx))
	for i, n := range idx {
		out[i] = query{q.v, p + strconv.Itoa(n) + "."}
	}
	return out
}

// strings returns the values of key.N.
func (q query) strings(key string) []string {
	var out []string
	for _, m := range q.list(key) {
		out = append(out, q.v.Get(strings.TrimSuffix(m.prefix, ".")))
	}
	return out
}

func (q query) int(key string, def int) (int, error) {
	s := q.get(key)
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

// tags reads TagSpecification.N into resource type -> tags.
func (q query) tagSpecs(key string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, ts := range q.list(key) {
		rt := ts.get("ResourceType")
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		for _, t := range ts.list("Tag") {
			out[rt][t.get("Key")] = t.get("Value")
		}
	}
	return out
}

type filter struct {
	name   string
	values []string
}

func (q query) filters() []filter {
	var out []filter
	for _, f := range q.list("Filter") {
		out = append(out, filter{f.get("Name"), f.strings("Value")})
	}
	return out
}

// match reports whether v matches one of the filter values (EC2 allows * and ? wildcards).
func (f filter) match(v string) bool {
	for _, w := range f.values {
		if wildcard(w, v) {
			return true
		}
	}
	return false
}

func wildcard(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if wildcard(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && wildcard(p[1:], s[1:])
	case '\\':
		if len(p) > 1 {
			return s != "" && s[0] == p[1] && wildcard(p[2:], s[1:])
		}
	}
	return s != "" && s[0] == p[0] && wildcard(p[1:], s[1:])
}
