package hostlist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	for _, tc := range expandCases {
		t.Run(fmt.Sprintf("%q", tc.expr), func(t *testing.T) {
			got, err := Expand(tc.expr)
			n, cerr := Count(tc.expr)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Expand(%q) = %q, want error %v", tc.expr, got, tc.wantErr)
				}
				checkErr(t, tc.expr, err, tc.wantErr, tc.errText)
				if cerr == nil {
					// Count validates numbers but not produced names;
					// only the suffix check may differ.
					if !strings.Contains(err.Error(), "expands to") {
						t.Errorf("Count(%q) = %d, nil; Expand failed: %v", tc.expr, n, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Expand(%q): %v", tc.expr, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Expand(%q)\n got %q\nwant %q", tc.expr, got, tc.want)
			}
			if cerr != nil || n != len(tc.want) {
				t.Errorf("Count(%q) = %d, %v; want %d", tc.expr, n, cerr, len(tc.want))
			}
		})
	}
}

func checkErr(t *testing.T, input string, err, kind error, text string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("error %v is not %v", err, kind)
	}
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("error %v (%T) is not a *hostlist.Error", err, err)
	}
	if !strings.Contains(err.Error(), text) {
		t.Errorf("error %q does not mention %q", err, text)
	}
	if he.Offset < 0 || he.Offset > len(he.Input) || !strings.Contains(he.Input[he.Offset:], he.Text) {
		t.Errorf("error offset %d / text %q do not point into input %q", he.Offset, he.Text, he.Input)
	}
	if he.Reason == "" || he.Hint == "" {
		t.Errorf("error %q lacks a reason or a hint", err)
	}
}

func TestErrorMessage(t *testing.T) {
	_, err := Expand("gpu-[1-4],n[5-1]")
	want := `hostlist "gpu-[1-4],n[5-1]" at byte 12 ("5-1"): reversed range 5-1: low end is greater than high end; write the lower number first, e.g. 1-5`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	long := strings.Repeat("node1,", 40) + "n[2-1]" + strings.Repeat(",node2", 40)
	_, err = Expand(long)
	if err == nil || len(err.Error()) > 250 || !strings.Contains(err.Error(), `n[2-1]`) {
		t.Fatalf("long-input error should be short and show the bad part, got %v", err)
	}
}

func TestExpandCapsWork(t *testing.T) {
	// Fails fast without allocating 4e9 names.
	_, err := Expand("a[1-65536]b[1-65536]")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	var many strings.Builder
	many.WriteString("n[")
	for i := range MaxRanges + 1 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteByte('1')
	}
	many.WriteByte(']')
	if _, err := Expand(many.String()); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "ranges in one bracket") {
		t.Fatalf("got %v, want too many ranges", err)
	}
	long := strings.Repeat("x", 200)
	if _, err := Expand(long + "[1-1000]b[1-1000]"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("200 MB of names: got %v, want ErrTooLarge", err)
	}
	names, err := Expand("a[1-1000]b[1-1000]")
	if err != nil || len(names) != MaxNames || names[len(names)-1] != "a1000b1000" {
		t.Fatalf("exactly MaxNames names: len %d, err %v", len(names), err)
	}
}

func TestCompress(t *testing.T) {
	for _, tc := range compressCases {
		got, err := Compress(tc.names)
		if err != nil || got != tc.want {
			t.Errorf("Compress(%q) = %q, %v; want %q", tc.names, got, err, tc.want)
			continue
		}
		back, err := Expand(got)
		if err != nil || !slices.Equal(back, tc.names) && len(tc.names)+len(back) > 0 {
			t.Errorf("Expand(Compress(%q)) = %q, %v", tc.names, back, err)
		}
	}
}

func TestCompressErrors(t *testing.T) {
	for _, tc := range []struct {
		names []string
		text  string
	}{
		{[]string{"n1", ""}, "host name 1 \"\" at byte 0 (\"\"): empty host name"},
		{[]string{"n1 n2"}, "separator ' '"},
		{[]string{"n1,n2"}, "separator ','"},
		{[]string{"n[1-2]"}, "bracket"},
		{[]string{"n1\r"}, "control character"},
		{[]string{"n99999999999999999999"}, "too large"},
	} {
		_, err := Compress(tc.names)
		if err == nil {
			t.Errorf("Compress(%q) succeeded, want error", tc.names)
			continue
		}
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "compressing hostlist: ") {
			t.Errorf("Compress(%q) error %q, want ErrSyntax mentioning %q", tc.names, err, tc.text)
		}
	}
}

func TestChunk(t *testing.T) {
	names, err := Expand("gpu-[1-40],cpu-r[1-3]-n[01-20],login,gpu-[50-99],login1,n[001-150],n[003-010]")
	if err != nil {
		t.Fatal(err)
	}
	for _, maxLen := range []int{10, 12, 20, 37, 100, 1000, MaxArgLen} {
		chunks, err := Chunk(names, maxLen)
		if err != nil {
			t.Fatalf("Chunk(maxLen=%d): %v", maxLen, err)
		}
		var back []string
		for i, c := range chunks {
			if len(c) > maxLen {
				t.Errorf("maxLen %d: chunk %d %q is %d bytes", maxLen, i, c, len(c))
			}
			part, err := Expand(c)
			if err != nil {
				t.Fatalf("maxLen %d: chunk %q: %v", maxLen, c, err)
			}
			if want, _ := Compress(part); want != c {
				t.Errorf("chunk %q is not Compress of its names (%q)", c, want)
			}
			// Greedy: the next name would not have fit.
			if i+1 < len(chunks) {
				next, _ := Expand(chunks[i+1])
				if more, _ := Compress(append(slices.Clone(part), next[0])); len(more) <= maxLen {
					t.Errorf("maxLen %d: chunk %d %q could also hold %q (%q)", maxLen, i, c, next[0], more)
				}
			}
			back = append(back, part...)
		}
		if !slices.Equal(back, names) {
			t.Errorf("maxLen %d: chunks %q do not expand back to the names", maxLen, chunks)
		}
		if maxLen == MaxArgLen && len(chunks) != 1 {
			t.Errorf("everything fits in one argument, got %d chunks", len(chunks))
		}
	}
	if _, err := Chunk([]string{"n1", "averyveryverylongname"}, 10); err == nil || !strings.Contains(err.Error(), "host name 1") {
		t.Errorf("name longer than maxLen: got %v", err)
	}
	if _, err := Chunk([]string{"n1"}, 0); err == nil {
		t.Error("maxLen 0 accepted")
	}
	if got, err := Chunk(nil, 10); err != nil || len(got) != 0 {
		t.Errorf("Chunk(nil) = %q, %v", got, err)
	}
}
