package cmd

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// termRegistry registers a leadership term's collectors (the reconciler's,
// the warm pool's, the SQS consumer's) and unregisters them when the term
// ends, so that the next term on this process registers its own.
type termRegistry struct {
	prometheus.Registerer
	mu sync.Mutex
	cs []prometheus.Collector
}

func newTermRegistry(r prometheus.Registerer) *termRegistry { return &termRegistry{Registerer: r} }

func (r *termRegistry) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
	return nil
}

func (r *termRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *termRegistry) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		r.Registerer.Unregister(c)
	}
	r.cs = nil
}

// holder names this sizer in the leadership record.
func holder() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", h, os.Getpid())
}

// leaderSync is POST /v1/ledger/sync's target: the ledger's sync while
// this sizer leads (zero when it runs none), and whether it leads.
type leaderSync[T any] struct {
	mu      sync.Mutex
	f       T
	leading bool
}

func (l *leaderSync[T]) lead(f T) { l.mu.Lock(); l.f, l.leading = f, true; l.mu.Unlock() }
func (l *leaderSync[T]) stand()   { var zero T; l.mu.Lock(); l.f, l.leading = zero, false; l.mu.Unlock() }
func (l *leaderSync[T]) get() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f, l.leading
}

// onTermEnd runs f when ctx (a leadership term's) ends.
func onTermEnd(ctx context.Context, f func()) { go func() { <-ctx.Done(); f() }() }
