package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Problem is one entry of slurmrestd's "errors" (or "warnings") array, or of
// a kill/requeue answer's "status" array.
type Problem struct {
	Error       string // Slurm's text for Number, e.g. "Invalid job id specified"
	Description string // what slurmrestd was doing: "Unable to query JobId=5"
	Number      int    // Slurm's errno (slurm_errno.h), 0 when not given
	// Source is where: a slurmrestd function ("_handle_job_get") or, for
	// a field of the request, its path ("#/hold/").
	Source  string
	Warning bool // from "warnings"
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(p.Error))
	if p.Description != "" && p.Description != p.Error {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p.Description)
	}
	if p.Number != 0 {
		fmt.Fprintf(&b, " (error %d)", p.Number)
	}
	if p.Source != "" {
		if strings.HasPrefix(p.Source, "#/") {
			fmt.Fprintf(&b, " [field %s]", strings.TrimSuffix(strings.TrimPrefix(p.Source, "#/"), "/"))
		} else {
			fmt.Fprintf(&b, " [%s]", p.Source)
		}
	}
	if p.Warning {
		b.WriteString(" (warning)")
	}
	return b.String()
}

// APIError is a request slurmrestd (or slurmctld behind it) refused: the
// endpoint, the HTTP status and what Slurm said. errors.Is finds
// slurm.ErrNotFound, ErrAccessDenied, ErrAuth and ErrUnsupported in it, as
// for the command-line client.
type APIError struct {
	Method   string // GET, POST, DELETE
	Endpoint string // the path, e.g. /slurm/v0.0.42/node/gpu-1
	Status   int    // HTTP status
	Problems []Problem
	// Body is the start of a non-JSON answer ("Authentication failure").
	Body string
}

func (e *APIError) Error() string {
	var msgs []string
	for _, p := range e.Problems {
		msgs = append(msgs, p.String())
	}
	if len(msgs) == 0 && e.Body != "" {
		msgs = append(msgs, fmt.Sprintf("%q", e.Body))
	}
	what := "no error given"
	if len(msgs) > 0 {
		what = strings.Join(msgs, "; ")
	}
	return fmt.Sprintf("slurmrestd %s %s: HTTP %d %s: %s", e.Method, e.Endpoint, e.Status, http.StatusText(e.Status), what)
}

// Unwrap gives burst's classification of the problems and the status.
func (e *APIError) Unwrap() []error {
	var out []error
	add := func(err error) {
		for _, o := range out {
			if o == err {
				return
			}
		}
		if err != nil {
			out = append(out, err)
		}
	}
	for _, p := range e.Problems {
		add(slurm.Classify(p.Number, p.Error+" "+p.Description))
	}
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusNetworkAuthenticationRequired:
		add(slurm.ErrAuth)
	case e.Status == http.StatusForbidden:
		add(slurm.ErrAccessDenied)
	case e.Status == http.StatusNotFound && len(e.Problems) == 0,
		e.Status == http.StatusMethodNotAllowed:
		// slurmrestd's "Unable to find requested URL": this slurmrestd has
		// no such endpoint (a data parser it does not load)
		add(slurm.ErrUnsupported)
	}
	return out
}

// envelope is what every slurmrestd answer has besides its records, in the
// forms of every data version: v0.0.38 errors name their number errno,
// error_code or error_number; v0.0.42+ kill and requeue answers report per
// job in "status".
type envelope struct {
	Errors   []rawProblem `json:"errors"`
	Warnings []rawProblem `json:"warnings"`
	Status   []struct {
		Error struct {
			String  string `json:"string"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		StepID string `json:"step_id"`
	} `json:"status"`
}

type rawProblem struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber *int   `json:"error_number"`
	Errno       *int   `json:"errno"`
	ErrorCode   *int   `json:"error_code"`
	Source      string `json:"source"`
}

func (r rawProblem) problem(warning bool) Problem {
	p := Problem{Error: r.Error, Description: r.Description, Source: r.Source, Warning: warning}
	for _, n := range []*int{r.ErrorNumber, r.Errno, r.ErrorCode} {
		if n != nil && *n != 0 {
			p.Number = *n
			break
		}
	}
	return p
}

// problems reads the problems of an answer: its errors, the per-job errors
// of "status", and the warnings that mean burst's request was not applied
// as sent (an unknown field). Other warnings come back in ignored.
func problems(body []byte) (errs, ignored []Problem, ok bool) {
	var env envelope
	if len(bytes.TrimSpace(body)) == 0 || json.Unmarshal(body, &env) != nil {
		return nil, nil, false
	}
	for _, r := range env.Errors {
		errs = append(errs, r.problem(false))
	}
	for _, s := range env.Status {
		if s.Error.Code != 0 {
			errs = append(errs, Problem{Error: s.Error.String, Description: s.Error.Message, Number: s.Error.Code, Source: "job " + s.StepID})
		}
	}
	for _, r := range env.Warnings {
		p := r.problem(true)
		if strings.Contains(p.Description, "nknown field") {
			errs = append(errs, p)
		} else {
			ignored = append(ignored, p)
		}
	}
	return errs, ignored, true
}
