package hostlist

import (
	"fmt"
	"strings"
)

// CompressSorted returns what `scontrol show hostlistsorted` prints for names
// joined with commas: Compress's ranges sorted (by prefix in natural order,
// then by number), with overlapping ranges split and adjacent ones joined.
// Like Slurm it does not remove every duplicate: n1,n1,n2 stays n[1,1-2] and
// n[1-3],n2 becomes n[1-2,2-3]. This emulates hostlist_sort of Slurm 22.05
// on glibc (whose qsort is a stable merge sort) step by step, including the
// comparison's side effect on zero-padding widths. It refuses input that
// Slurm's sort mishandles (numbers 2^31 apart: Slurm loses hosts). As in
// Slurm, overlap splitting is superlinear on heavily duplicated input (100
// copies of n[1-100] take seconds, as in scontrol); Compress is linear and
// is what burst should use for batching.
func CompressSorted(names []string) (string, error) {
	rs := make([]*hrange, 0, len(names))
	for i, n := range names {
		h, err := parseName(i, n)
		if err != nil {
			return "", fmt.Errorf("compressing hostlist: %w", err)
		}
		if k := len(rs); k > 0 {
			t := rs[k-1]
			if t.hi == h.lo-1 && samePrefix(t, &h) && widthEquiv(t.lo, &t.width, h.lo, &h.width) {
				t.hi = h.hi
				continue
			}
		}
		rs = append(rs, &h)
	}
	if len(rs) > 1 {
		misordered := false
		msort(rs, make([]*hrange, len(rs)), &misordered)
		if misordered {
			// Slurm compares numbers as (int)(lo1 - lo2); past 2^31 it
			// misorders them and then drops hosts while coalescing.
			return "", fmt.Errorf("compressing hostlist: %w", &Error{Input: strings.Join(names, ","), Index: -1,
				Reason: "numbers with one prefix differ by 2^31 or more, which Slurm 22.05's sort mishandles (it loses hosts)",
				Hint:   "use Compress, which does not sort", Kind: ErrTooLarge})
		}
		rs = coalesce(rs)
		rs = collapse(rs)
	}
	flat := make([]hrange, len(rs))
	for i, h := range rs {
		flat[i] = *h
	}
	return string(appendRanged(nil, flat)), nil
}

// msort is glibc's msort_with_tmp: top-down merge sort, left wins ties.
// It sets *bad when a comparison's sign differs from the true order.
func msort(b, tmp []*hrange, bad *bool) {
	n := len(b)
	if n <= 1 {
		return
	}
	n1 := n / 2
	b1, b2 := b[:n1], b[n1:]
	msort(b1, tmp, bad)
	msort(b2, tmp, bad)
	t := tmp[:0]
	for len(b1) > 0 && len(b2) > 0 {
		if hostrangeCmp(b1[0], b2[0], bad) <= 0 {
			t, b1 = append(t, b1[0]), b1[1:]
		} else {
			t, b2 = append(t, b2[0]), b2[1:]
		}
	}
	t = append(t, b1...) // what remains of b2 is already in place
	copy(b, t)
}

// hostrangeCmp is Slurm's hostrange_cmp, with C's int conversion of the
// difference of two unsigned longs; *bad is set when that gets the sign wrong.
func hostrangeCmp(h1, h2 *hrange, bad *bool) int {
	if r := prefixCmp(h1, h2); r != 0 {
		return r
	}
	if widthEquiv(h1.lo, &h1.width, h2.lo, &h2.width) {
		r := int(int32(uint32(h1.lo - h2.lo)))
		if (r < 0) != (h1.lo < h2.lo) || (r == 0) != (h1.lo == h2.lo) {
			*bad = true
		}
		return r
	}
	return h1.width - h2.width
}

// prefixCmp is hostrange_prefix_cmp.
func prefixCmp(h1, h2 *hrange) int {
	if r := strnatcmp(h1.prefix, h2.prefix); r != 0 {
		return r
	}
	return b2i(h2.single) - b2i(h1.single)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// at returns s[i] as C's signed char, or 0 past the end.
func at(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	return int(int8(s[i]))
}

func natDigit(c int) bool { return c >= '0' && c <= '9' }
func natSpace(c int) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// strnatcmp is Slurm's strnatcmp (Martin Pool's natural order comparison).
func strnatcmp(a, b string) int {
	ai, bi := 0, 0
	for {
		ca, cb := at(a, ai), at(b, bi)
		for natSpace(ca) {
			ai++
			ca = at(a, ai)
		}
		for natSpace(cb) {
			bi++
			cb = at(b, bi)
		}
		if natDigit(ca) && natDigit(cb) {
			var r int
			if ca == '0' || cb == '0' {
				r = compareLeft(a, ai, b, bi)
			} else {
				r = compareRight(a, ai, b, bi)
			}
			if r != 0 {
				return r
			}
		}
		if ca == 0 && cb == 0 {
			return 0
		}
		if ca < cb {
			return -1
		}
		if ca > cb {
			return 1
		}
		ai++
		bi++
	}
}

// compareRight compares right-aligned numbers: the longer run wins, else
// the first difference.
func compareRight(a string, ai int, b string, bi int) int {
	bias := 0
	for ; ; ai, bi = ai+1, bi+1 {
		ca, cb := at(a, ai), at(b, bi)
		switch {
		case !natDigit(ca) && !natDigit(cb):
			return bias
		case !natDigit(ca):
			return -1
		case !natDigit(cb):
			return 1
		case ca < cb:
			if bias == 0 {
				bias = -1
			}
		case ca > cb:
			if bias == 0 {
				bias = 1
			}
		}
	}
}

// compareLeft compares left-aligned (fractional) numbers.
func compareLeft(a string, ai int, b string, bi int) int {
	for ; ; ai, bi = ai+1, bi+1 {
		ca, cb := at(a, ai), at(b, bi)
		switch {
		case !natDigit(ca) && !natDigit(cb):
			return 0
		case !natDigit(ca):
			return -1
		case !natDigit(cb):
			return 1
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
	}
}

func empty(h *hrange) bool { return h.hi < h.lo || h.hi == ^uint64(0) }

// intersect is hostrange_intersect.
func intersect(h1, h2 *hrange) *hrange {
	if h1.single || h2.single {
		return nil
	}
	if h1.hi > h2.lo && prefixCmp(h1, h2) == 0 && widthEquiv(h1.lo, &h1.width, h2.lo, &h2.width) {
		n := *h1
		n.lo = h2.lo
		n.hi = min(h2.hi, h1.hi)
		return &n
	}
	return nil
}

func insertAt(rs []*hrange, h hrange, n int) []*hrange {
	if n > len(rs) {
		return rs
	}
	rs = append(rs, nil)
	copy(rs[n+1:], rs[n:])
	rs[n] = &h
	return rs
}

func deleteAt(rs []*hrange, n int) []*hrange { return append(rs[:n], rs[n+1:]...) }

// coalesce is hostlist_coalesce: split overlapping neighbours.
func coalesce(rs []*hrange) []*hrange {
	for i := len(rs) - 1; i > 0; i-- {
		nw := intersect(rs[i-1], rs[i])
		if nw == nil {
			continue
		}
		hprev, hnext := rs[i-1], rs[i]
		j := i
		if nw.hi < hprev.hi {
			hnext.hi = hprev.hi
		}
		hprev.hi = nw.lo
		hnext.lo = nw.hi
		if empty(hprev) {
			rs = deleteAt(rs, i)
		}
		for nw.lo <= nw.hi {
			h := hrange{prefix: nw.prefix, lo: nw.lo, hi: nw.lo, width: nw.width}
			if nw.lo > hprev.hi {
				rs = insertAt(rs, h, j)
				j++
			}
			if nw.lo < hnext.lo {
				rs = insertAt(rs, h, j)
				j++
			}
			nw.lo++
		}
		i = len(rs)
	}
	return rs
}

// collapse is hostlist_collapse: join ranges that continue each other.
func collapse(rs []*hrange) []*hrange {
	for i := len(rs) - 1; i > 0; i-- {
		hprev, hnext := rs[i-1], rs[i]
		if hprev.hi == hnext.lo-1 && prefixCmp(hprev, hnext) == 0 && widthEquiv(hprev.lo, &hprev.width, hnext.lo, &hnext.width) {
			hprev.hi = hnext.hi
			rs = deleteAt(rs, i)
		}
	}
	return rs
}
