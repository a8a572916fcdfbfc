package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

func batchOf(node string, seq0 uint64, n int, job uint32, t time.Time) sizerapi.ReportBatch {
	b := sizerapi.ReportBatch{Node: node}
	for i := 0; i < n; i++ {
		b.Records = append(b.Records, gpuRecord(seq0+uint64(i), t, job, []uint32{50, 0, 0, 0, 0, 0, 0, 0}, []uint64{3, 0, 0, 0, 0, 0, 0, 0}))
	}
	return b
}

// BenchmarkAddBatch: 16 agents posting 10-record batches concurrently,
// with group commit (default) and one transaction per batch (baseline).
func BenchmarkAddBatch(b *testing.B) {
	var base float64
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"per-batch-commit", []Option{WithoutGroupCommit()}}, {"group-commit", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "s"), mode.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var next atomic.Int64
			var wg sync.WaitGroup
			now := time.Now()
			b.ResetTimer()
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					node := fmt.Sprintf("gpu-%d", w)
					for seq := uint64(1); ; seq += 10 {
						if next.Add(1) > int64(b.N) {
							return
						}
						rb := batchOf(node, seq, 10, uint32(w), now)
						if _, err := s.AddBatch(context.Background(), rb); err != nil {
							b.Error(err)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "batches/s")
			if mode.opts != nil {
				base = rate // the last (largest-N) baseline run
			} else if base > 0 {
				b.ReportMetric(rate/base, "x_per-batch-commit")
			}
		})
	}
}
