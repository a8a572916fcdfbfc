package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Options configure a Reporter.
type Options struct {
	Node       string
	InstanceID string
	// GPUSource is sizerapi.GPUSourceNVML or GPUSourceSim, sent with every
	// batch so the sizer learns from real GPUs only.
	GPUSource string
	// Dir is the state directory of the on-disk buffer (see Spool).
	Dir   string
	Spool SpoolOptions
	// Interval between sends; default 15 s.
	Interval time.Duration
	// MaxBatch is the most records per Send; default 256.
	MaxBatch int
	// SendTimeout bounds one Send; default 10 s.
	SendTimeout time.Duration
	Logger      *slog.Logger
}

// Stats count what a Reporter did since it started.
type Stats struct {
	Spool         SpoolStats
	Sent          uint64 // records acknowledged by the sink
	Rejected      uint64 // records in batches the sink refused for good
	SendFailures  uint64
	LastSendError string
}

// Reporter spools records and sends them to a Sink in order.
type Reporter struct {
	sink  Sink
	opts  Options
	spool *Spool
	log   *slog.Logger

	sendMu sync.Mutex // one Flush at a time
	mu     sync.Mutex
	stats  Stats
}

// New opens the spool in o.Dir and returns a Reporter sending to sink.
// Records spooled by an earlier run that were not acknowledged are sent
// first, with their original sequence numbers.
func New(sink Sink, o Options) (*Reporter, error) {
	if sink == nil {
		return nil, errors.New("creating reporter: nil sink")
	}
	if o.Node == "" {
		return nil, errors.New("creating reporter: node name is empty")
	}
	if o.Dir == "" {
		return nil, errors.New("creating reporter: state dir is empty")
	}
	if o.Interval == 0 {
		o.Interval = 15 * time.Second
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = 10 * time.Second
	}
	if o.Interval < 0 || o.MaxBatch < 0 || o.SendTimeout < 0 {
		return nil, fmt.Errorf("creating reporter: negative interval %v, batch %d or timeout %v", o.Interval, o.MaxBatch, o.SendTimeout)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	sp, err := OpenSpool(o.Dir, o.Spool)
	if err != nil {
		return nil, fmt.Errorf("creating reporter: %w", err)
	}
	return &Reporter{sink: sink, opts: o, spool: sp, log: o.Logger.With("component", "report")}, nil
}

// Add spools one record (its Seq is assigned here).
func (r *Reporter) Add(rec sizerapi.Record) error {
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	if err := r.spool.Append(&rec); err != nil {
		return fmt.Errorf("adding %s record: %w", rec.Kind, err)
	}
	return nil
}

// Flush fsyncs the spool and sends every pending record in batches of
// MaxBatch, in sequence order, stopping at the first failure (the rest
// stays spooled for the next Flush). A batch already sent when ctx ends is
// finished (bounded by SendTimeout), not abandoned: abandoning it after the
// sizer stored it would leave it unacknowledged here and send it twice.
// No further batch starts once ctx is done.
func (r *Reporter) Flush(ctx context.Context) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if err := r.spool.Sync(); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("flushing reports: %w", err)
		}
		recs, err := r.spool.Pending(r.opts.MaxBatch)
		if err != nil {
			return fmt.Errorf("flushing reports: %w", err)
		}
		if len(recs) == 0 {
			return nil
		}
		b := sizerapi.ReportBatch{Node: r.opts.Node, InstanceID: r.opts.InstanceID, GPUSource: r.opts.GPUSource, Dropped: r.spool.Dropped(), Records: recs}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.SendTimeout)
		err = r.sink.Send(sctx, b)
		cancel()
		last := recs[len(recs)-1].Seq
		if err != nil && !errors.Is(err, ErrRejected) {
			r.mu.Lock()
			r.stats.SendFailures++
			r.stats.LastSendError = err.Error()
			r.mu.Unlock()
			return fmt.Errorf("sending reports %d..%d: %w", recs[0].Seq, last, err)
		}
		if err := r.spool.Ack(last); err != nil {
			return fmt.Errorf("flushing reports: %w", err)
		}
		r.mu.Lock()
		if err != nil {
			r.stats.Rejected += uint64(len(recs))
			r.log.Error("sizer rejected report batch; dropped it", "first_seq", recs[0].Seq, "last_seq", last, "err", err)
		} else {
			r.stats.Sent += uint64(len(recs))
		}
		r.stats.LastSendError = ""
		r.mu.Unlock()
	}
}

// Run flushes every Interval until ctx is done, then tries one last flush
// (bounded by SendTimeout) and closes the spool. What could not be sent
// stays on disk for the next run.
func (r *Reporter) Run(ctx context.Context) error {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.SendTimeout)
			if err := r.Flush(fctx); err != nil {
				r.log.Warn("final report flush failed; records stay spooled", "err", err)
			}
			cancel()
			return r.Close()
		case <-t.C:
			if ctx.Err() != nil {
				continue // the final flush above runs next
			}
			err := r.Flush(ctx)
			switch {
			case err != nil && !failing:
				r.log.Warn("sending reports failed; buffering on disk", "err", err, "pending", r.spool.Stats().Pending)
				failing = true
			case err == nil && failing:
				r.log.Info("sending reports recovered", "sent", r.Stats().Sent)
				failing = false
			}
		}
	}
}

// Stats returns counters.
func (r *Reporter) Stats() Stats {
	r.mu.Lock()
	s := r.stats
	r.mu.Unlock()
	s.Spool = r.spool.Stats()
	return s
}

// Close closes the spool (fsyncing it). It does not send.
func (r *Reporter) Close() error {
	return r.spool.Close()
}
