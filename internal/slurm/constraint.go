package slurm

import (
	"fmt"
	"strconv"
)

// MatchConstraint evaluates a Slurm --constraint expression over a node's
// features: names joined by & (and; also ","), | (or), grouped with ( ) or
// [ ] (Slurm's matching or, which for a single node is an or), each name
// optionally with a *count (ignored: one node) and, in Slurm 23.02 and
// later, negated with !. Names match whole, case-sensitively, as in Slurm.
func MatchConstraint(expr string, features map[string]bool) (bool, error) {
	p := &constraintParser{s: expr, f: features}
	v, err := p.or()
	if err != nil {
		return false, err
	}
	p.space()
	if p.i < len(p.s) {
		return false, fmt.Errorf("unexpected %q at column %d", p.s[p.i], p.i+1)
	}
	return v, nil
}

type constraintParser struct {
	s string
	i int
	f map[string]bool
	d int // nesting depth
}

func (p *constraintParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *constraintParser) or() (bool, error) {
	v, err := p.and()
	if err != nil {
		return false, err
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '|' {
			return v, nil
		}
		p.i++
		w, err := p.and()
		if err != nil {
			return false, err
		}
		v = v || w
	}
}

func (p *constraintParser) and() (bool, error) {
	v, err := p.unary()
	if err != nil {
		return false, err
	}
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '&' && p.s[p.i] != ',') {
			return v, nil
		}
		p.i++
		w, err := p.unary()
		if err != nil {
			return false, err
		}
		v = v && w
	}
}

func (p *constraintParser) unary() (bool, error) {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '!' {
		p.i++
		v, err := p.unary()
		return !v, err
	}
	if p.i < len(p.s) && (p.s[p.i] == '(' || p.s[p.i] == '[') {
		open := p.s[p.i]
		closeCh := byte(')')
		if open == '[' {
			closeCh = ']'
		}
		p.i++
		if p.d++; p.d > 32 {
			return false, fmt.Errorf("nested more than 32 deep")
		}
		v, err := p.or()
		if err != nil {
			return false, err
		}
		p.d--
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != closeCh {
			return false, fmt.Errorf("missing %q at column %d", closeCh, p.i+1)
		}
		p.i++
		return v, p.count()
	}
	start := p.i
	for p.i < len(p.s) && isFeatureByte(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		if p.i >= len(p.s) {
			return false, fmt.Errorf("a feature name is missing at the end")
		}
		return false, fmt.Errorf("unexpected %q at column %d", p.s[p.i], p.i+1)
	}
	name := p.s[start:p.i]
	return p.f[name], p.count()
}

// count skips a "*N" suffix.
func (p *constraintParser) count() error {
	if p.i >= len(p.s) || p.s[p.i] != '*' {
		return nil
	}
	p.i++
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if _, err := strconv.Atoi(p.s[start:p.i]); err != nil {
		return fmt.Errorf("count after '*' at column %d is not a number", start+1)
	}
	return nil
}

func isFeatureByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' || c == '=' || c == '+' || c == '/'
}
