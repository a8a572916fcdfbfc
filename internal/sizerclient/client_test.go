package sizerclient

import (
	"errors"
	"testing"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
)

func TestNewValidates(t *testing.T) {
	for _, u := range []string{"", "localhost:8470", "ftp://x", "http://"} {
		if _, err := New(u, "tok"); err == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
	if _, err := New("http://127.0.0.1:8470", ""); err == nil {
		t.Error("empty token accepted")
	}
}

func TestAPIErrorClasses(t *testing.T) {
	cases := []struct {
		e      *APIError
		target error
	}{
		{&APIError{Status: 402, Code: sizerapi.CodeOverBudget}, sizing.ErrOverBudget},
		{&APIError{Status: 401, Code: sizerapi.CodeUnauthorized}, ErrUnauthorized},
		{&APIError{Status: 403, Code: sizerapi.CodeForbidden}, ErrUnauthorized},
		{&APIError{Status: 409, Code: sizerapi.CodeNoOffering}, sizing.ErrNoOffering},
		{&APIError{Status: 503, Code: sizerapi.CodeShuttingDown}, ErrUnavailable},
	}
	for _, c := range cases {
		for _, other := range []error{sizing.ErrOverBudget, sizing.ErrNoOffering} {
			if other != c.target && errors.Is(c.e, other) {
				t.Errorf("%v must not read as %v", c.e, other)
			}
		}
		if !errors.Is(c.e, c.target) {
			t.Errorf("%v is not %v", c.e, c.target)
		}
		if c.target != ErrUnavailable && errors.Is(c.e, ErrUnavailable) {
			t.Errorf("%v must not read as unavailable (callers would fall back and bypass it)", c.e)
		}
	}
}
