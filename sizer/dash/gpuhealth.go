package dash

import (
	"context"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// gpuHealth is the Fleet view's GPU health events: the last 24 hours, at
// most 50, for the admin only (an account's view shows none: the events
// name instances of every account).
func (s *Source) gpuHealth(ctx context.Context, sc Scope, now time.Time) ([]sizerapi.GPUHealthRow, error) {
	if !sc.All() {
		return []sizerapi.GPUHealthRow{}, nil
	}
	rows, err := s.o.Store.GPUHealthEvents(ctx, now.Add(-24*time.Hour), 50)
	if rows == nil {
		rows = []sizerapi.GPUHealthRow{}
	}
	return rows, err
}
