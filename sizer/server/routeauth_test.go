package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/munge"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

// fakeMunge is a stateful RouteAuthenticator: credentials "MUNGE:<user>:"
// decode to that user once, a second decode is a replay, "MUNGE:uid7:" is
// a uid with no name, anything else is refused.
type fakeMunge struct{ used map[string]bool }

func (f *fakeMunge) Decode(_ context.Context, cred string) (munge.Identity, error) {
	if f.used[cred] {
		return munge.Identity{}, fmt.Errorf("%w: Replayed credential (status 17)", munge.ErrRefused)
	}
	f.used[cred] = true
	user, ok := strings.CutPrefix(cred, "MUNGE:")
	user, ok2 := strings.CutSuffix(user, ":")
	switch {
	case !ok || !ok2:
		return munge.Identity{}, fmt.Errorf("%w: not a MUNGE credential", munge.ErrRefused)
	case user == "uid7":
		return munge.Identity{UID: 7}, nil
	}
	return munge.Identity{User: user, UID: 1000}, nil
}

func TestRouteUserFromMunge(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.RouteAuth = &fakeMunge{used: map[string]bool{}} })
	rc := f.client(t, auth.RouteToken(f.token))
	admin := f.client(t, f.token)
	ctx := context.Background()
	job := func(user string) sizerapi.JobRequest { return sizerapi.JobRequest{User: user, GPUsPerNode: 1} }
	status := func(err error) int {
		var ae *sizerclient.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	for _, c := range []struct {
		name, user, cred string
		cl               *sizerclient.Client
		want             int
	}{
		{"admin token needs no MUNGE", "anyone", "", admin, http.StatusOK},
		{"route credential without MUNGE", "alice", "", rc, http.StatusUnauthorized},
		{"alice for alice", "alice", "MUNGE:alice:", rc, http.StatusOK},
		{"alice's credential again", "alice", "MUNGE:alice:", rc, http.StatusUnauthorized},
		{"alice's credential for bob", "bob", "MUNGE:alice2:", rc, http.StatusForbidden},
		{"no user claimed: the proven one", "", "MUNGE:carol:", rc, http.StatusOK},
		{"a uid without a name", "", "MUNGE:uid7:", rc, http.StatusUnauthorized},
		{"refused credential", "alice", "garbage", rc, http.StatusUnauthorized},
	} {
		_, err := c.cl.RouteAs(ctx, job(c.user), c.cred)
		got := status(err)
		if err == nil {
			got = http.StatusOK
		}
		if got != c.want {
			t.Errorf("%s: %v (status %d), want %d", c.name, err, got, c.want)
		}
		if c.want == http.StatusForbidden && !strings.Contains(err.Error(), `"bob"`) {
			t.Errorf("%s: %v; want the message to name the claimed user", c.name, err)
		}
	}
}

// TestRouteUserWithoutRouteAuth: sizer.route_auth: token takes the claim.
func TestRouteUserWithoutRouteAuth(t *testing.T) {
	f := start(t, nil)
	if _, err := f.client(t, auth.RouteToken(f.token)).Route(context.Background(), sizerapi.JobRequest{User: "bob", GPUsPerNode: 1}); err != nil {
		t.Fatal(err)
	}
}
