package server

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"golang.org/x/time/rate"
)

// limiter is a token bucket per key (a node's instance, or a client
// address for the unauthenticated identity exchange), over
// golang.org/x/time/rate.
type limiter struct {
	rate  rate.Limit // tokens per second
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newLimiter(r float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate.Limit(r), burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token for key; when none is left it returns how long until
// one is.
func (l *limiter) allow(key string) (bool, time.Duration) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 50000 {
			// forget idle buckets (full ones cost nothing to recreate)
			for k, ob := range l.buckets {
				if ob.TokensAt(now) >= float64(l.burst) {
					delete(l.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	res := b.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now) // a refused request takes no token
		return false, wait
	}
	return true, 0
}

func rateLimited(w http.ResponseWriter, wait time.Duration, who string) int {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait.Seconds()+0.999))))
	return writeErr(w, &apiError{429, sizerapi.CodeRateLimited, "too many requests from " + who + "; retry later"})
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
