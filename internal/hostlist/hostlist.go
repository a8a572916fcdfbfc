// Package hostlist expands and compresses Slurm hostlist expressions the way
// Slurm 22.05 does (src/common/hostlist.c, 1-D clusters), so that burst agrees
// with slurmctld about which nodes an expression names.
//
// Expand matches `scontrol show hostnames EXPR` and Compress matches
// `scontrol show hostlist NAMES` byte for byte on every input they accept;
// TestAgainstScontrol checks this against the real scontrol on a table and on
// generated expressions. Slurm's rules, kept here: names are split on ',',
// ' ', '\t' and '\n' outside brackets; zero padding comes from the low end of
// a range (n[1-010] is n1..n10, n[01-9] is n01..n09); with several brackets
// the last varies fastest and the others nest from right to left (see
// Expand); only the last run of digits of a name is compressed; Compress
// neither sorts nor removes duplicates.
//
// They reject some inputs that Slurm 22.05 accepts and mangles; each is a
// documented divergence that the scontrol test verifies is real:
//
//   - an unclosed '[' ("n[1-3": Slurm yields "n]") or a stray ']' ("n1]");
//   - anything in a range list but digits, '-' and ',': Slurm's strtoul
//     takes "n[ 3]" as n03, "n[+1]" as n01, and "n[1-]" is n1 to Slurm;
//   - with three or more brackets, a bad range in a bracket before the last
//     two: Slurm prints an error and silently drops the whole name group;
//   - ASCII control characters (a CR from a CRLF file) anywhere;
//   - numbers of 2^64-1 and above, also as a name's numeric suffix (Slurm
//     saturates them, or crashes on n[18446744073709551614-18446744073709551615]);
//   - expansions of more than MaxNames names or MaxBytes bytes (Slurm has
//     no overall cap).
//
// Slurm's own limits are kept: at most MaxRangeHosts names per range and
// MaxRanges ranges per bracket.
package hostlist

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits. MaxRangeHosts and MaxRanges are Slurm 22.05's (MAX_RANGE and
// MAX_RANGES in hostlist.c). MaxNames and MaxBytes are burst's own guards so
// that garbage cannot exhaust memory; both are checked before any name is
// built. (Slurm's MAX_PREFIX_CNT, 1048576 names per non-final bracket, is
// implied by MaxNames.)
const (
	MaxRangeHosts = 64 * 1024  // names in one range such as 1-65536
	MaxRanges     = 256 * 1024 // comma-separated ranges inside one [...]
	MaxNames      = 1_000_000  // names produced by a whole expression
	MaxBytes      = 128 << 20  // bytes of names produced by a whole expression
)

// maxNumber is the largest number Slurm handles without saturating strtoul
// or treating the range as empty (hostrange_empty tests hi == ULONG_MAX).
const maxNumber = math.MaxUint64 - 1

// Sentinel errors; every error returned by this package wraps one of them.
var (
	// ErrSyntax: the expression or a host name is malformed.
	ErrSyntax = errors.New("invalid hostlist")
	// ErrTooLarge: the expression names more hosts than a limit allows.
	ErrTooLarge = errors.New("hostlist too large")
)

// Error describes a malformed expression or host name: what is wrong, where,
// and how to fix it.
type Error struct {
	Input  string // the expression, or the offending host name
	Index  int    // index of the host name in Compress/Chunk input; -1 for an expression
	Offset int    // byte offset of Text within Input
	Text   string // the offending part of Input
	Reason string // what is wrong
	Hint   string // how to fix it
	Kind   error  // ErrSyntax or ErrTooLarge
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "host name %d %s", e.Index, quoteShort(e.Input, e.Offset))
	} else {
		fmt.Fprintf(&b, "hostlist %s", quoteShort(e.Input, e.Offset))
	}
	fmt.Fprintf(&b, " at byte %d (%q): %s", e.Offset, e.Text, e.Reason)
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Unwrap returns ErrSyntax or ErrTooLarge.
func (e *Error) Unwrap() error { return e.Kind }

// quoteShort quotes s, eliding all but about 60 bytes around off.
func quoteShort(s string, off int) string {
	const keep = 30
	if len(s) <= 2*keep+10 {
		return strconv.Quote(s)
	}
	lo, hi := max(off-keep, 0), min(off+keep, len(s))
	out := strconv.Quote(s[lo:hi])
	if lo > 0 {
		out = "..." + out
	}
	if hi < len(s) {
		out += "..."
	}
	return out
}

// rng is one element of a bracket list: lo..hi printed zero-padded to width
// (the length of lo as written, as in Slurm: n[1-010] is n1..n10).
type rng struct {
	lo, hi uint64
	width  int
}

func (r rng) count() uint64 { return r.hi - r.lo + 1 }

// group is one [...] in a token.
type group struct {
	ranges []rng
	count  uint64 // total names, duplicates included
}

// token is one top-level element of an expression:
// lits[0] groups[0] lits[1] groups[1] ... groups[k-1] (Slurm 22.05 allows no
// text after the last bracket). A plain name has no groups, only name.
type token struct {
	name   string
	off    int // byte offsets of the token in the expression
	end    int
	lits   []string
	groups []group
	count  uint64
	maxLen uint64 // upper bound on the length of one name
}

// isSep reports whether c separates top-level tokens; Slurm uses "\t, \n".
func isSep(c byte) bool { return c == ',' || c == ' ' || c == '\t' || c == '\n' }

func isCtl(c byte) bool { return c < 0x20 || c == 0x7f }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Expand returns the host names an expression denotes, in Slurm's order,
// duplicates kept: "a,b[1-2],c" is a b1 b2 c; "n[3,1-2]" is n3 n1 n2. With
// several brackets the last varies fastest, then the first, second, ...:
// r[1-2]-n[1-2] is r1-n1 r1-n2 r2-n1 r2-n2, and a[1-2]b[1-2]c[1-2] is a1b1c1
// a1b1c2 a2b1c1 a2b1c2 a1b2c1 ... (Slurm's recursion order). An empty or
// all-separator expression yields no names. Errors are *Error wrapping
// ErrSyntax or ErrTooLarge.
func Expand(expr string) ([]string, error) {
	// Validate and size everything first, then build: two cheap parses
	// keep no per-token state alive while names are built.
	total, err := parse(expr, nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, total)
	_, err = parse(expr, func(t *token) error {
		names, err = t.expand(expr, names)
		return err
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// parse validates expr, checks the limits, and calls emit (when not nil)
// for each token. It returns the number of names.
func parse(expr string, emit func(*token) error) (int, error) {
	var total, bytes uint64
	i := 0
	for i < len(expr) {
		if isSep(expr[i]) {
			i++
			continue
		}
		start := i
		depth := 0
		open := -1
		for i < len(expr) && (depth > 0 || !isSep(expr[i])) {
			switch c := expr[i]; {
			case c == '[':
				if depth > 0 {
					return 0, synErr(expr, open, expr[open:i+1], "nested '['",
						"brackets cannot nest; write each range list once, e.g. n[1-2,5]")
				}
				depth, open = 1, i
			case c == ']':
				if depth == 0 {
					return 0, synErr(expr, i, "]", "']' without a matching '['",
						"remove the ']' or add the '[' that opens it")
				}
				depth = 0
			case isCtl(c):
				return 0, synErr(expr, i, expr[i:i+1], "control character in hostlist",
					"remove it (a CR from a CRLF file?); separate names with ',' or spaces")
			}
			i++
		}
		if depth > 0 {
			return 0, synErr(expr, open, expr[open:i], "'[' is never closed",
				"add the closing ']', e.g. n[1-4]")
		}
		tok, err := parseToken(expr, start, i)
		if err != nil {
			return 0, err
		}
		total += tok.count
		if total > MaxNames {
			return 0, &Error{Input: expr, Index: -1, Offset: start, Text: expr[start:i],
				Reason: fmt.Sprintf("expression names more than %d hosts", MaxNames),
				Hint:   "split it into smaller hostlists", Kind: ErrTooLarge}
		}
		if bytes += tok.count * tok.maxLen; bytes > MaxBytes {
			return 0, &Error{Input: expr, Index: -1, Offset: start, Text: expr[start:i],
				Reason: fmt.Sprintf("expression expands to more than %d MiB of names", MaxBytes>>20),
				Hint:   "split it into smaller hostlists or shorten the names", Kind: ErrTooLarge}
		}
		if emit != nil {
			if err := emit(&tok); err != nil {
				return 0, err
			}
		}
	}
	return int(total), nil
}

func synErr(expr string, off int, text, reason, hint string) *Error {
	return &Error{Input: expr, Index: -1, Offset: off, Text: text, Reason: reason, Hint: hint, Kind: ErrSyntax}
}

// parseToken parses expr[start:end], which has balanced, unnested brackets
// and no separators outside brackets.
func parseToken(expr string, start, end int) (token, error) {
	t := token{off: start, end: end, count: 1}
	s := expr[start:end]
	litStart := 0
	for j := 0; j < len(s); j++ {
		if s[j] != '[' {
			continue
		}
		k := j + strings.IndexByte(s[j:], ']')
		t.lits = append(t.lits, s[litStart:j])
		g, err := parseGroup(expr, start+j+1, start+k)
		if err != nil {
			return t, err
		}
		t.groups = append(t.groups, g)
		t.count *= g.count // t.count <= MaxNames and g.count <= 2^34: no overflow
		if t.count > MaxNames {
			return t, &Error{Input: expr, Index: -1, Offset: start, Text: s,
				Reason: fmt.Sprintf("expression names more than %d hosts", MaxNames),
				Hint:   "split it into smaller hostlists", Kind: ErrTooLarge}
		}
		litStart = k + 1
		j = k
	}
	if len(t.groups) == 0 {
		if err := checkSuffix(s); err != nil {
			return t, &Error{Input: expr, Index: -1, Offset: start + err.Offset, Text: err.Text,
				Reason: err.Reason, Hint: err.Hint, Kind: ErrSyntax}
		}
		t.name = s
		t.maxLen = uint64(len(s))
		return t, nil
	}
	if litStart != len(s) {
		return t, synErr(expr, start+litStart, s[litStart:], "text after the last ']'",
			"Slurm 22.05 allows no suffix after the final bracket; write e.g. n[1-2]x as n1x,n2x")
	}
	for gi, g := range t.groups {
		t.maxLen += uint64(len(t.lits[gi]))
		w := 0
		for _, r := range g.ranges {
			w = max(w, r.width, len(strconv.FormatUint(r.hi, 10)))
		}
		t.maxLen += uint64(w)
	}
	// Slurm also limits each non-final bracket to 1048576 names;
	// MaxNames is lower, so the check above already covers that.
	return t, nil
}

// parseGroup parses the range list expr[start:end] (inside the brackets).
func parseGroup(expr string, start, end int) (group, error) {
	var g group
	s := expr[start:end]
	if s == "" {
		return g, synErr(expr, start-1, expr[start-1:end+1], "empty range list",
			"put at least one number between the brackets, e.g. n[1-4]")
	}
	pos := 0
	for {
		comma := strings.IndexByte(s[pos:], ',')
		item := s[pos:]
		if comma >= 0 {
			item = s[pos : pos+comma]
		}
		r, err := parseRange(expr, start+pos, item)
		if err != nil {
			return g, err
		}
		if len(g.ranges) == MaxRanges {
			return g, &Error{Input: expr, Index: -1, Offset: start - 1, Text: expr[start-1 : end+1],
				Reason: fmt.Sprintf("more than %d ranges in one bracket", MaxRanges),
				Hint:   "merge adjacent numbers into ranges (1-3 rather than 1,2,3) or split the list", Kind: ErrTooLarge}
		}
		g.ranges = append(g.ranges, r)
		g.count += r.count()
		if comma < 0 {
			return g, nil
		}
		pos += comma + 1
	}
}

// parseRange parses "N" or "N-M" at expr offset off.
func parseRange(expr string, off int, item string) (rng, error) {
	if item == "" {
		return rng{}, synErr(expr, off, item, "empty range",
			"remove the extra ',' or put a number there, e.g. n[1,3]")
	}
	loText, hiText, isRange := strings.Cut(item, "-")
	for i := 0; i < len(item); i++ {
		if c := item[i]; !isDigit(c) && c != '-' {
			reason := fmt.Sprintf("non-numeric character %q in range %q", c, item)
			return rng{}, synErr(expr, off+i, item[i:i+1], reason,
				"ranges are decimal numbers or N-M, e.g. n[01-10,15]")
		}
	}
	if loText == "" || (isRange && (hiText == "" || strings.Contains(hiText, "-"))) {
		return rng{}, synErr(expr, off, item, fmt.Sprintf("malformed range %q", item),
			"write a range as N-M with both ends, e.g. n[1-4]")
	}
	lo, err := parseNumber(loText)
	if err != nil {
		return rng{}, synErr(expr, off, item, err.Error(), "use smaller numbers")
	}
	r := rng{lo: lo, hi: lo, width: len(loText)}
	if isRange {
		if r.hi, err = parseNumber(hiText); err != nil {
			return rng{}, synErr(expr, off, item, err.Error(), "use smaller numbers")
		}
	}
	if r.lo > r.hi {
		return rng{}, synErr(expr, off, item, fmt.Sprintf("reversed range %s: low end is greater than high end", item),
			fmt.Sprintf("write the lower number first, e.g. %s-%s", hiText, loText))
	}
	if r.count() > MaxRangeHosts {
		return rng{}, &Error{Input: expr, Index: -1, Offset: off, Text: item,
			Reason: fmt.Sprintf("range %s names %d hosts, Slurm allows %d per range", item, r.count(), MaxRangeHosts),
			Hint:   "split it into several ranges, e.g. n[1-65536,65537-70000]", Kind: ErrTooLarge}
	}
	return r, nil
}

// parseNumber parses a decimal string of digits, rejecting values Slurm
// cannot represent.
func parseNumber(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > maxNumber {
		return 0, fmt.Errorf("number %s is too large (Slurm handles at most %d)", s, uint64(maxNumber))
	}
	return v, nil
}

func trailingDigits(b []byte) int {
	n := 0
	for n < len(b) && isDigit(b[len(b)-1-n]) {
		n++
	}
	return n
}

// checkSuffix rejects a name whose trailing digits Slurm would mangle
// (strtoul saturates above 2^64-1).
// Offsets in the returned error are relative to name.
func checkSuffix(name string) *Error {
	i := len(name)
	for i > 0 && isDigit(name[i-1]) {
		i--
	}
	if len(name)-i >= 20 {
		if _, err := parseNumber(name[i:]); err != nil {
			return &Error{Offset: i, Text: name[i:], Reason: "numeric suffix " + err.Error(),
				Hint: "Slurm would rewrite this name; use a shorter number", Kind: ErrSyntax}
		}
	}
	return nil
}

// expand appends the names of t to out. Slurm (_push_range_list) handles
// the final bracket as the innermost loop and the others from right to left
// by recursion, so for a[..]b[..]c[..] the b bracket varies slowest, then a,
// then c; for two brackets the first varies slowest.
func (t *token) expand(expr string, out []string) ([]string, error) {
	if len(t.groups) == 0 {
		return append(out, t.name), nil
	}
	k := len(t.groups)
	// order[0] is the outermost loop.
	order := make([]int, 0, k)
	for gi := k - 2; gi >= 0; gi-- {
		order = append(order, gi)
	}
	order = append(order, k-1)

	// Cursor per group: range index and value.
	type cursor struct {
		ri  int
		val uint64
	}
	cur := make([]cursor, k)
	for gi := range cur {
		cur[gi] = cursor{0, t.groups[gi].ranges[0].lo}
	}
	// Build all names in one buffer, then slice it.
	buf := make([]byte, 0, t.maxLen*t.count)
	ends := make([]int, 0, t.count)
	var num [24]byte
	for n := uint64(0); n < t.count; n++ {
		startLen := len(buf)
		for gi := 0; gi < k; gi++ {
			buf = append(buf, t.lits[gi]...)
			r := t.groups[gi].ranges[cur[gi].ri]
			d := strconv.AppendUint(num[:0], cur[gi].val, 10)
			for p := len(d); p < r.width; p++ {
				buf = append(buf, '0')
			}
			buf = append(buf, d...)
		}
		if trailingDigits(buf[startLen:]) >= 20 {
			if err := checkSuffix(string(buf[startLen:])); err != nil {
				return nil, synErr(expr, t.off, expr[t.off:t.end],
					"expands to "+strconv.Quote(string(buf[startLen:]))+" whose "+err.Reason, err.Hint)
			}
		}
		ends = append(ends, len(buf))
		// Advance the odometer, innermost loop first.
		for oi := k - 1; oi >= 0; oi-- {
			gi := order[oi]
			c := &cur[gi]
			rs := t.groups[gi].ranges
			if c.val < rs[c.ri].hi {
				c.val++
				break
			}
			if c.ri+1 < len(rs) {
				c.ri++
				c.val = rs[c.ri].lo
				break
			}
			c.ri, c.val = 0, rs[0].lo // wrap and carry
		}
	}
	all := string(buf)
	prev := 0
	for _, e := range ends {
		out = append(out, all[prev:e])
		prev = e
	}
	return out, nil
}
