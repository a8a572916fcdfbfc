package server

import (
	"context"
	"net/http"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
)

// runKey is a job's recurring-job key, computed here from what Slurm says
// (user, job name, comment), never taken from the caller.
func runKey(j sizerapi.Job) string {
	md, _ := jobmeta.ParseMetadata(j.Comment)
	return sizing.RecurringKey(j.User, j.JobName, md)
}

func (s *Server) jobStart(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var run sizerapi.JobStart
	if err := decode(r, &run); err != nil {
		return nil, err
	}
	if run.JobID == "" || run.User == "" {
		return nil, badRequest("job start needs job_id and user")
	}
	if run.Start.IsZero() {
		run.Start = s.now()
	}
	if err := s.st.StartRun(context.WithoutCancel(r.Context()), runKey(run.Job), run); err != nil {
		return nil, err
	}
	s.runs.WithLabelValues("started").Inc()
	return struct{}{}, nil
}

func (s *Server) jobEnd(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var e sizerapi.JobEnd
	if err := decode(r, &e); err != nil {
		return nil, err
	}
	if e.JobID == "" {
		return nil, badRequest("job end needs job_id")
	}
	if e.End.IsZero() {
		e.End = s.now()
	}
	known, err := s.st.EndRun(context.WithoutCancel(r.Context()), e)
	if err != nil {
		return nil, err
	}
	switch {
	case !known:
		s.log.Warn("end of a job the sizer never saw start", "job", e.JobID)
	case e.OOM:
		s.runs.WithLabelValues("oom").Inc()
		s.log.Info("job ran out of GPU memory; its next run is sized up", "job", e.JobID, "evidence", e.Evidence)
	default:
		s.runs.WithLabelValues("ended").Inc()
	}
	return struct{}{}, nil
}
