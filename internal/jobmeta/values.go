package jobmeta

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxTokenLen bounds seq= and context= (16M tokens).
const MaxTokenLen = 16 << 20

// parseTokenLen reads a token length: digits, or digits with K or M as
// powers of 1024 (the LLM convention: 8K = 8192, 128K = 131072).
func parseTokenLen(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K") || strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M") || strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > MaxTokenLen/mult {
		return 0, fmt.Errorf("bad token length %q", s)
	}
	return n * mult, nil
}

// splitNumber splits "7.5B" into 7.5 and "B".
func splitNumber(s string) (float64, string, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", fmt.Errorf("no number in %q", s)
	}
	f, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, "", err
	}
	return f, s[i:], nil
}

// parseCount parses 7B, 1.5T, 350M, 20K, 1e9 (as plain digits) into a count.
func parseCount(s string) (float64, error) {
	f, unit, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	mult := map[string]float64{"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}[strings.ToUpper(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	return f * mult, nil
}

// parseBytes parses decimal (KB, MB, GB, TB, PB) and binary (KiB ... PiB)
// sizes; a bare number or B is bytes.
func parseBytes(s string) (float64, error) {
	f, unit, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	u := strings.ToUpper(unit)
	dec := map[string]float64{"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12, "P": 1e15, "PB": 1e15}
	bin := map[string]float64{"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "PIB": 1 << 50}
	if m, ok := dec[u]; ok {
		return f * m, nil
	}
	if m, ok := bin[u]; ok {
		return f * m, nil
	}
	return 0, fmt.Errorf("unknown unit %q", unit)
}

// parseDuration accepts Go durations (1h30m, 90m, 45s) plus days (2d, 1d12h).
func parseDuration(s string) (time.Duration, error) {
	ls := strings.ToLower(s)
	var days float64
	if i := strings.IndexByte(ls, 'd'); i >= 0 {
		f, err := strconv.ParseFloat(ls[:i], 64)
		if err != nil {
			return 0, err
		}
		days, ls = f, ls[i+1:]
	}
	var rest time.Duration
	if ls != "" {
		d, err := time.ParseDuration(ls)
		if err != nil {
			return 0, err
		}
		rest = d
	}
	total := float64(rest) + days*24*float64(time.Hour)
	if total > float64(math.MaxInt64/2) {
		return 0, fmt.Errorf("duration %q too long", s)
	}
	return time.Duration(total), nil
}
