// Package telemetry turns GPU samples into batched, sequenced reports for the
// sizer (the records of internal/sizerapi), buffers them on disk while the
// sizer is unreachable, and summarises each job's GPU use when it ends.
package telemetry

import (
	"context"
	"errors"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Sink delivers a batch to the sizer. A nil error means the server stored
// every record in it. An error wrapping ErrRejected means the server will
// never accept the batch (malformed); it is dropped and counted rather than
// retried forever. Any other error is retried at the next interval.
type Sink interface {
	Send(ctx context.Context, b sizerapi.ReportBatch) error
}

// ErrRejected marks a batch the server refused permanently.
var ErrRejected = errors.New("batch rejected by server")
