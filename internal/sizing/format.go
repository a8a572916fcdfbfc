package sizing

import (
	"fmt"
	"math"
	"strings"
	"time"
)

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func fmtCount(n float64) string {
	switch {
	case n >= 1e12:
		return trimF(n/1e12) + "T"
	case n >= 1e9:
		return trimF(n/1e9) + "B"
	case n >= 1e6:
		return trimF(n/1e6) + "M"
	case n >= 1e3:
		return trimF(n/1e3) + "K"
	}
	return trimF(n)
}

func trimF(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", f), "0"), ".")
}

func fmtDur(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return d.String()
}
