package hostlist

import (
	"fmt"
	"strconv"
)

// MaxArgLen is the longest single command-line argument Linux accepts
// (MAX_ARG_STRLEN, 32 pages, less the terminating NUL). A hostlist passed
// as part of one argument, e.g. "NodeName=" + list, must fit in it.
const MaxArgLen = 32*4096 - 1

// hrange mirrors Slurm's hostrange: prefix plus lo..hi printed zero-padded to
// width, or a single host with no numeric suffix (the whole name in prefix).
type hrange struct {
	prefix string
	lo, hi uint64
	width  int
	single bool
}

func (h *hrange) count() uint64 {
	if h.single {
		return 1
	}
	return h.hi - h.lo + 1
}

// parseName splits a host name as Slurm's hostname_create does on a 1-D
// cluster: trailing decimal digits are the number, the rest the prefix.
func parseName(idx int, name string) (hrange, error) {
	if name == "" {
		return hrange{}, &Error{Input: name, Index: idx, Reason: "empty host name",
			Hint: "remove the empty entry", Kind: ErrSyntax}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		var reason, hint string
		switch {
		case isSep(c):
			reason, hint = fmt.Sprintf("separator %q inside a host name", c), "pass one name per element, without spaces or commas"
		case c == '[' || c == ']':
			reason, hint = "bracket inside a host name", "pass plain names; use Expand first if you have an expression"
		case isCtl(c):
			reason, hint = "control character in host name", "remove it (a CR from a CRLF file?)"
		default:
			continue
		}
		return hrange{}, &Error{Input: name, Index: idx, Offset: i, Text: name[i : i+1], Reason: reason, Hint: hint, Kind: ErrSyntax}
	}
	if err := checkSuffix(name); err != nil {
		err.Input, err.Index = name, idx
		return hrange{}, err
	}
	i := len(name)
	for i > 0 && isDigit(name[i-1]) {
		i--
	}
	if i == len(name) {
		return hrange{prefix: name, single: true}, nil
	}
	n, _ := strconv.ParseUint(name[i:], 10, 64) // checked by checkSuffix
	return hrange{prefix: name[:i], lo: n, hi: n, width: len(name) - i}, nil
}

// zeroPadded returns how many zeros pad num to width (Slurm _zero_padded).
func zeroPadded(num uint64, width int) int {
	n := 1
	for num /= 10; num > 0; num /= 10 {
		n++
	}
	return max(width-n, 0)
}

// widthEquiv is Slurm's _width_equiv: whether numbers n and m formatted with
// widths wn and wm may share one width; if so it adjusts one of the widths.
func widthEquiv(n uint64, wn *int, m uint64, wm *int) bool {
	if *wn == *wm {
		return true
	}
	npad, nmpad := zeroPadded(n, *wn), zeroPadded(n, *wm)
	mpad, mnpad := zeroPadded(m, *wm), zeroPadded(m, *wn)
	switch {
	case npad != nmpad && mpad != mnpad:
		return false
	case npad != nmpad:
		*wm = *wn
	default:
		*wn = *wm
	}
	return true
}

// samePrefix is hostrange_prefix_cmp(a, b) == 0. Slurm compares with
// strnatcmp, which equals string equality for names without whitespace.
func samePrefix(a, b *hrange) bool { return a.single == b.single && a.prefix == b.prefix }

// withinRange is hostrange_within_range: a and b share one bracket.
func withinRange(a, b *hrange) bool { return samePrefix(a, b) && !a.single && !b.single }

// push appends h as hostlist_push_range does: it extends the last range when
// h continues it (same prefix, next number, compatible width).
func push(rs []hrange, h hrange) []hrange {
	if n := len(rs); n > 0 {
		t := &rs[n-1]
		if t.hi == h.lo-1 && samePrefix(t, &h) && widthEquiv(t.lo, &t.width, h.lo, &h.width) {
			t.hi = h.hi
			return rs
		}
	}
	return append(rs, h)
}

// appendRanged renders rs as hostlist_ranged_string does on a 1-D cluster.
func appendRanged(dst []byte, rs []hrange) []byte {
	for i := 0; i < len(rs); {
		if i > 0 {
			dst = append(dst, ',')
		}
		bracket := rs[i].count() > 1 || (i+1 < len(rs) && withinRange(&rs[i], &rs[i+1]))
		dst = append(dst, rs[i].prefix...)
		if bracket {
			dst = append(dst, '[')
		}
		for first := i; ; {
			if i > first {
				dst = append(dst, ',')
			}
			dst = appendNumstr(dst, &rs[i])
			i++
			if i >= len(rs) || !withinRange(&rs[i], &rs[i-1]) {
				break
			}
		}
		if bracket {
			dst = append(dst, ']')
		}
	}
	return dst
}

func appendPadded(dst []byte, v uint64, width int) []byte {
	for p := zeroPadded(v, width); p > 0; p-- {
		dst = append(dst, '0')
	}
	return strconv.AppendUint(dst, v, 10)
}

func appendNumstr(dst []byte, h *hrange) []byte {
	if h.single {
		return dst
	}
	dst = appendPadded(dst, h.lo, h.width)
	if h.lo < h.hi {
		dst = append(dst, '-')
		dst = appendPadded(dst, h.hi, h.width)
	}
	return dst
}

func parseNames(names []string) ([]hrange, error) {
	hs := make([]hrange, len(names))
	for i, n := range names {
		h, err := parseName(i, n)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}

// Compress returns the hostlist expression `scontrol show hostlist` prints
// for names joined with commas: order and duplicates are kept, consecutive
// numbers with compatible zero padding merge into ranges, and only the last
// run of digits in a name is compressed (r1-n1,r2-n1 stays as it is).
// Names must be plain host names: no separators, brackets or control
// characters. Compress(nil) is "".
func Compress(names []string) (string, error) {
	var rs []hrange
	size := 0
	for i, n := range names {
		h, err := parseName(i, n)
		if err != nil {
			return "", fmt.Errorf("compressing hostlist: %w", err)
		}
		rs = push(rs, h)
		size += len(n) + 1
	}
	return string(appendRanged(make([]byte, 0, size), rs)), nil
}

// Chunk splits names, in order, into as few consecutive runs as a greedy
// pass allows such that each run's Compress form is at most maxLen bytes,
// and returns those forms. Expanding the chunks in order gives back names.
// Use it to keep `scontrol update NodeName=...` arguments under MaxArgLen.
func Chunk(names []string, maxLen int) ([]string, error) {
	if maxLen < 1 {
		return nil, fmt.Errorf("chunking hostlist: maxLen %d must be at least 1", maxLen)
	}
	hs, err := parseNames(names)
	if err != nil {
		return nil, fmt.Errorf("chunking hostlist: %w", err)
	}
	var rs []hrange
	var buf []byte
	render := func(part []hrange) []byte {
		rs = rs[:0]
		for _, h := range part {
			rs = push(rs, h)
		}
		buf = appendRanged(buf[:0], rs)
		return buf
	}
	// The rendered length strictly grows as names are appended, so the
	// longest run that fits can be found by galloping and bisection.
	fits := func(a, b int) bool { return len(render(hs[a:b])) <= maxLen }
	var out []string
	for a := 0; a < len(hs); {
		if !fits(a, a+1) {
			return nil, fmt.Errorf("chunking hostlist: host name %d %q is %d bytes, longer than the limit %d: %w",
				a, names[a], len(names[a]), maxLen, ErrTooLarge)
		}
		good, bad := a+1, len(hs)+1
		for step := 1; good+step <= len(hs); step *= 2 {
			if !fits(a, good+step) {
				bad = good + step
				break
			}
			good += step
		}
		for bad-good > 1 {
			mid := good + (bad-good)/2
			if fits(a, mid) {
				good = mid
			} else {
				bad = mid
			}
		}
		out = append(out, string(render(hs[a:good])))
		a = good
	}
	return out, nil
}
