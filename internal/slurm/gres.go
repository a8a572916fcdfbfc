package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// GRES is one generic resource request or inventory item, e.g. gpu:a10g:2.
type GRES struct {
	Name   string // "gpu"
	Type   string // "a10g"; "" when untyped
	Count  uint64 // 1 when the string gave no count
	Detail string // text in trailing parentheses, e.g. "S:0-1" or "IDX:0,1"; "" if none
}

// String formats g the way Slurm writes GRES: name[:type]:count[(detail)].
func (g GRES) String() string {
	var b strings.Builder
	b.WriteString(g.Name)
	if g.Type != "" {
		b.WriteString(":" + g.Type)
	}
	b.WriteString(":" + strconv.FormatUint(g.Count, 10))
	if g.Detail != "" {
		b.WriteString("(" + g.Detail + ")")
	}
	return b.String()
}

// maxGRESCount bounds counts (Slurm itself uses 64-bit counts; nothing real
// comes near this).
const maxGRESCount = 1 << 40

// ParseGRES parses a GRES list as Slurm prints it in gres.conf-style node
// inventories, job requests (--gres, tres_per_node, tres_per_job) and
// gres_used:
//
//	gpu  gpu:2  gpu:a10g:2  gres:gpu:h100:8  gpu:a100:4(S:0-1)  gpu:a100:0(IDX:N/A)
//	gres/gpu=2  gres/gpu:a10g=2 (TRES form)  gpu:2,nic:1 (comma list)
//
// Counts may carry a k/m/g/t suffix (powers of 1024). "", "(null)" and
// "N/A" give an empty list. Errors name the item and say what is expected.
func ParseGRES(s string) ([]GRES, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" || s == "N/A" {
		return nil, nil
	}
	items, err := splitOutsideParens(s)
	if err != nil {
		return nil, fmt.Errorf("parsing GRES %q: %w", s, err)
	}
	out := make([]GRES, 0, len(items))
	for i, it := range items {
		g, err := parseGRESItem(it)
		if err != nil {
			return nil, fmt.Errorf("parsing GRES %q, item %d %q: %w; want NAME[:TYPE][:COUNT], e.g. gpu:a10g:2", s, i+1, it, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// splitOutsideParens splits on commas that are not inside parentheses.
func splitOutsideParens(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("nested parenthesis at byte %d", i)
			}
		case ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ')' at byte %d", i)
			}
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed '('")
	}
	return append(items, s[start:]), nil
}

func parseGRESItem(it string) (GRES, error) {
	var g GRES
	it = strings.TrimSpace(it)
	if it == "" {
		return g, fmt.Errorf("empty item")
	}
	if i := strings.IndexByte(it, '('); i >= 0 {
		if !strings.HasSuffix(it, ")") {
			return g, fmt.Errorf("text after ')'")
		}
		g.Detail = it[i+1 : len(it)-1]
		it = it[:i]
		if g.Detail == "" {
			return g, fmt.Errorf("empty parentheses")
		}
		for _, r := range g.Detail {
			if r < 0x20 || r == 0x7f {
				return g, fmt.Errorf("control character in %q", g.Detail)
			}
		}
	}
	switch {
	case strings.HasPrefix(it, "gres:"):
		it = it[len("gres:"):]
	case strings.HasPrefix(it, "gres/"):
		it = it[len("gres/"):]
	}
	var parts []string
	if name, cnt, ok := strings.Cut(it, "="); ok { // TRES form: gpu[:type]=count
		parts = append(strings.Split(name, ":"), cnt)
		if len(parts) > 3 || cnt == "" {
			return g, fmt.Errorf("malformed TRES form")
		}
		if len(parts) == 2 {
			parts = []string{parts[0], "", parts[1]}
		}
	} else {
		parts = strings.Split(it, ":")
		switch len(parts) {
		case 1:
			parts = []string{parts[0], "", "1"}
		case 2:
			if looksLikeCount(parts[1]) {
				parts = []string{parts[0], "", parts[1]}
			} else {
				parts = []string{parts[0], parts[1], "1"}
			}
		case 3:
		default:
			return g, fmt.Errorf("too many ':' fields (%d)", len(parts))
		}
	}
	g.Name, g.Type = parts[0], parts[1]
	if err := checkWord("name", g.Name, false); err != nil {
		return g, err
	}
	if c := g.Name[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return g, fmt.Errorf("name %q does not start with a letter", g.Name)
	}
	if g.Name == "gres" {
		return g, fmt.Errorf(`name "gres" is reserved (it is the prefix of gres:NAME)`)
	}
	if err := checkWord("type", g.Type, true); err != nil {
		return g, err
	}
	n, err := parseCount(parts[2])
	if err != nil {
		return g, err
	}
	g.Count = n
	return g, nil
}

// looksLikeCount reports whether s has the shape of a count, DIGITS[kmgt];
// anything else in the second of two fields is a type ("gpu:1g.5gb").
func looksLikeCount(s string) bool {
	if s == "" {
		return false
	}
	if c := s[len(s)-1]; strings.IndexByte("kKmMgGtT", c) >= 0 {
		s = s[:len(s)-1]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseCount(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty count")
	}
	mult := uint64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	case 't', 'T':
		mult = 1 << 40
	}
	num := s
	if mult != 1 {
		num = s[:len(s)-1]
	}
	if num == "" || num[0] == '+' || num[0] == '-' {
		return 0, fmt.Errorf("count %q is not a non-negative integer", s)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q is not a non-negative integer", s)
	}
	if n > maxGRESCount/mult {
		return 0, fmt.Errorf("count %q is larger than %d", s, uint64(maxGRESCount))
	}
	return n * mult, nil
}

// checkWord accepts names and types made of letters, digits and . _ -
func checkWord(what, s string, emptyOK bool) error {
	if s == "" {
		if emptyOK {
			return nil
		}
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > 64 {
		return fmt.Errorf("%s %.20q... longer than 64 bytes", what, s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%s %q has character %q (allowed: letters, digits, . _ -)", what, s, r)
		}
	}
	return nil
}

// GPUs sums the counts of the "gpu" entries of list.
func GPUs(list []GRES) uint64 {
	var n uint64
	for _, g := range list {
		if g.Name == "gpu" {
			n += g.Count
		}
	}
	return n
}
