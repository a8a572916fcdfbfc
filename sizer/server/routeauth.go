package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/munge"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// RouteAuthenticator decodes the MUNGE credential of a route request
// (munge.Runner; a fake beside it in tests).
type RouteAuthenticator interface {
	Decode(ctx context.Context, cred string) (munge.Identity, error)
}

func unauthorized(format string, args ...any) error {
	e := forbidden(format, args...).(*apiError)
	e.status, e.code = http.StatusUnauthorized, sizerapi.CodeUnauthorized
	return e
}

// routeUser is the user a route request is decided for. The admin token
// (burst-resume, root on the head node) names any user; the route
// credential, which every user can read, names only the user its MUNGE
// credential proves, when route_auth is munge. A request naming another
// user is refused rather than answered for the proven one, so a mistake is
// seen; a request naming none is decided for the proven user.
func (s *Server) routeUser(ctx context.Context, r *http.Request, p auth.Principal, claimed string) (string, error) {
	if p.Admin || s.o.RouteAuth == nil {
		return claimed, nil
	}
	cred := r.Header.Get(sizerapi.HeaderMunge)
	if cred == "" {
		return "", unauthorized("route: this sizer authenticates the submitting user with MUNGE (sizer.route_auth: munge) and the request has no %s header; `burst-sizer route` sends one when munge works where it runs (is munged running, and is slurm.munge_socket its socket?)", sizerapi.HeaderMunge)
	}
	id, err := s.o.RouteAuth.Decode(ctx, cred)
	if err != nil {
		if errors.Is(err, munge.ErrRefused) {
			return "", unauthorized("route: %v", err)
		}
		return "", err
	}
	user := id.User
	if user == "" {
		return "", unauthorized("route: the MUNGE credential's uid %d has no user name on the sizer's host: the head node and the submit hosts must share users", id.UID)
	}
	if claimed != "" && claimed != user {
		return "", forbidden("route: the request is for user %q but its MUNGE credential is user %q (uid %d): a user routes only their own jobs", claimed, user, id.UID)
	}
	return user, nil
}
