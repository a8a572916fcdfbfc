package sizerclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Admissions reads the shared admissions document and its version.
func (c *Client) Admissions(ctx context.Context) (sizerapi.Admissions, error) {
	var out sizerapi.Admissions
	err := c.do(ctx, http.MethodGet, sizerapi.PathAdmissions, nil, &out)
	return out, err
}

// SwapAdmissions stores a new admissions document over version a.Version;
// ErrConflict when another decision came first.
func (c *Client) SwapAdmissions(ctx context.Context, a sizerapi.Admissions) (int64, error) {
	var out sizerapi.Admissions
	err := c.do(ctx, http.MethodPost, sizerapi.PathAdmissions, a, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == sizerapi.CodeConflict {
		return 0, fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return out.Version, err
}

// ErrConflict: the admissions changed since they were read.
var ErrConflict = errors.New("admissions changed meanwhile")

// SharedAdmissions is internal/admit's Shared over the sizer's API: each
// update reads the document, decides, and swaps its result in only if no
// other decision (from any cluster, through any sizer) came in between;
// else it decides again on the newer document.
type SharedAdmissions struct{ C *Client }

// MaxAdmissionRetries bounds the decisions one update makes under
// contention.
const MaxAdmissionRetries = 50

// UpdateAdmissions implements admit.Shared.
func (s SharedAdmissions) UpdateAdmissions(ctx context.Context, f func(old []byte) ([]byte, bool, error)) error {
	for try := 0; try < MaxAdmissionRetries; try++ {
		cur, err := s.C.Admissions(ctx)
		if err != nil {
			return err
		}
		doc, write, err := f(cur.Doc)
		if err != nil || !write {
			return err
		}
		_, err = s.C.SwapAdmissions(ctx, sizerapi.Admissions{Doc: doc, Version: cur.Version})
		if !errors.Is(err, ErrConflict) {
			return err
		}
		select { // another decision came first: decide again
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try%8+1) * 5 * time.Millisecond):
		}
	}
	return fmt.Errorf("updating the shared admissions: %d decisions in a row lost the race; the sizer's database is too contended", MaxAdmissionRetries)
}

// ReadAdmissions implements admit.Shared.
func (s SharedAdmissions) ReadAdmissions(ctx context.Context) ([]byte, error) {
	cur, err := s.C.Admissions(ctx)
	return cur.Doc, err
}
