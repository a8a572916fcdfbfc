package hostlist

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzExpand: Expand never panics; its errors are typed; whatever it accepts
// survives Compress and expands back to the same names in the same order
// (stronger than equality as sets); Count agrees; Chunk round-trips.
// `go test` runs the seed corpus; fuzz with
// go test -run '^$' -fuzz FuzzExpand -fuzztime 60s ./internal/hostlist
func FuzzExpand(f *testing.F) {
	for _, tc := range expandCases {
		f.Add(tc.expr)
	}
	for _, tc := range compressCases {
		f.Add(strings.Join(tc.names, ","))
	}
	f.Add("n[1-65536],n[65537-65538]")
	f.Fuzz(func(t *testing.T, expr string) {
		n, cerr := Count(expr)
		if cerr == nil && n > 70_000 {
			// Huge but valid: instrumented, these take seconds each and
			// stall the fuzzer. TestExpandCapsWork covers the large end.
			return
		}
		names, err := Expand(expr)
		if err != nil {
			var he *Error
			if !errors.As(err, &he) || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("Expand(%q): untyped error %v", expr, err)
			}
			if he.Offset < 0 || he.Offset > len(expr) || he.Input != expr || he.Reason == "" {
				t.Fatalf("Expand(%q): error fields %+v", expr, he)
			}
			return
		}
		if cerr != nil || n != len(names) {
			t.Fatalf("Count(%q) = %d, %v; Expand gave %d names", expr, n, cerr, len(names))
		}
		c, err := Compress(names)
		if err != nil {
			t.Fatalf("Compress(Expand(%q)): %v", expr, err)
		}
		back, err := Expand(c)
		if err != nil {
			// Compress, like scontrol, may merge ranges past Slurm's
			// per-range limit; nothing else may fail.
			if errors.Is(err, ErrTooLarge) && len(names) > MaxRangeHosts {
				return
			}
			t.Fatalf("Expand(Compress(Expand(%q))) = Expand(%q): %v", expr, c, err)
		}
		if !slices.Equal(back, names) {
			t.Fatalf("round trip of %q via %q:\n got %q\nwant %q", expr, c, back, names)
		}
		if len(names) > 2000 {
			return
		}
		const maxLen = 24
		chunks, err := Chunk(names, maxLen)
		if err != nil {
			if !slices.ContainsFunc(names, func(s string) bool { return len(s) > maxLen }) {
				t.Fatalf("Chunk(%q): %v", names, err)
			}
			return
		}
		var joined []string
		for _, ch := range chunks {
			if len(ch) > maxLen {
				t.Fatalf("chunk %q longer than %d", ch, maxLen)
			}
			part, err := Expand(ch)
			if err != nil {
				t.Fatalf("chunk %q: %v", ch, err)
			}
			joined = append(joined, part...)
		}
		if !slices.Equal(joined, names) {
			t.Fatalf("chunks %q of %q lose or reorder names", chunks, names)
		}
	})
}

// FuzzCompress: any comma-separated list Compress accepts expands back to the
// same names.
func FuzzCompress(f *testing.F) {
	for _, tc := range compressCases {
		f.Add(strings.Join(tc.names, ","))
	}
	f.Fuzz(func(t *testing.T, s string) {
		names := strings.Split(s, ",")
		c, err := Compress(names)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Compress(%q): untyped error %v", names, err)
			}
			return
		}
		back, err := Expand(c)
		if err != nil {
			t.Fatalf("Expand(Compress(%q)) = Expand(%q): %v", names, c, err)
		}
		if !slices.Equal(back, names) {
			t.Fatalf("Compress(%q) = %q expands to %q", names, c, back)
		}
	})
}
