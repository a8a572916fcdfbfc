package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/sizing"
)

// FallbackRanker asks the sizer and, when it does not answer in time, ranks
// in-process with the same policy code. Over-budget and no-offering answers
// from the sizer are final.
type FallbackRanker struct {
	Sizer   *sizerclient.Client // may be nil
	Local   *sizing.Policy
	Timeout time.Duration
	Log     *slog.Logger
}

// Rank implements Ranker.
func (f *FallbackRanker) Rank(ctx context.Context, rq sizerapi.RankRequest) ([]cloud.Offering, string, error) {
	log := logOr(f.Log)
	if f.Sizer != nil {
		cctx, cancel := context.WithTimeout(ctx, f.Timeout)
		resp, err := f.Sizer.Rank(cctx, rq)
		cancel()
		switch {
		case err == nil && len(resp.Offerings) > 0:
			return resp.Offerings, "sizer", nil
		case errors.Is(err, sizing.ErrOverBudget), errors.Is(err, sizing.ErrNoOffering):
			return nil, "sizer", err
		}
		log.Warn("sizer did not answer; ranking in-process", "job", rq.Job.JobID, "err", err)
	}
	req, merrs := rq.Job.Policy()
	for _, e := range merrs {
		log.Warn("job metadata", "job", rq.Job.JobID, "problem", e.Error())
	}
	offers, err := f.Local.Rank(sizing.RankInput{Class: rq.Class, Request: req, Zones: rq.Zones})
	return offers, "in-process", err
}
