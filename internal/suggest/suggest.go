// Package suggest finds the known name a mistyped one was meant to be, for
// "did you mean ...?" in burst's error messages (burst.yaml keys, job
// metadata keys).
package suggest

// maxLen bounds the words compared: the distance costs len(a) x len(b), and
// the input is untrusted (a job's comment).
const maxLen = 64

// Closest returns the name in known nearest to word by edit distance when
// it is at most two edits away, else "".
func Closest(word string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := Distance(word, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Distance is the Levenshtein distance of a and b; words longer than 64
// bytes are far from everything.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
