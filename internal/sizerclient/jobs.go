package sizerclient

import (
	"context"
	"net/http"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// JobStarted records a job starting on burst nodes (PrologSlurmctld): it
// enters the history of its recurring job.
func (c *Client) JobStarted(ctx context.Context, r sizerapi.JobStart) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathJobStart, r, nil)
}

// JobEnded records how a job ended (EpilogSlurmctld).
func (c *Client) JobEnded(ctx context.Context, e sizerapi.JobEnd) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathJobEnd, e, nil)
}
