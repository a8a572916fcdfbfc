package sizerclient

import (
	"context"
	"net/http"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Fleet returns the Fleet view (GET /v1/fleet; the admin's scope shows the
// GPU health events).
func (c *Client) Fleet(ctx context.Context) (sizerapi.FleetView, error) {
	var out sizerapi.FleetView
	err := c.do(ctx, http.MethodGet, sizerapi.PathFleet, nil, &out)
	return out, err
}
