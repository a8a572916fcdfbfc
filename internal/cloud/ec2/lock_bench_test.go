package ec2

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkLaunchLock is the per-node launch lock's cost on its own, timed
// around lockNodes and its release: what each launch of one node pays
// (StateDir/launch/<node>.lock: open, flock, unlock, close), for 10, 1,000
// and 10,000 nodes (-short: 10) in one state directory, first when the
// lock files do not exist yet (a node's first resume on this head node),
// then again when they do. One line per size:
//
//	launch-lock nodes=N first_us_per_node=F again_us_per_node=A
func BenchmarkLaunchLock(b *testing.B) {
	sizes := []int{10, 1000, 10000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for range b.N {
				p := &Provider{opts: Options{StateDir: b.TempDir()}}
				first, again := lockEach(b, p, n), lockEach(b, p, n)
				fmt.Printf("launch-lock nodes=%d first_us_per_node=%.1f again_us_per_node=%.1f\n",
					n, float64(first.Nanoseconds())/1e3/float64(n), float64(again.Nanoseconds())/1e3/float64(n))
			}
		})
	}
}

// lockEach takes and releases each of n nodes' launch locks in turn, as n
// single-node launches do, and returns the time it took.
func lockEach(b *testing.B, p *Provider, n int) time.Duration {
	t0 := time.Now()
	for i := range n {
		unlock, err := p.lockNodes([]string{fmt.Sprintf("a10g-%d", i+1)})
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
	return time.Since(t0)
}
