package slurm

import (
	"context"
	"fmt"
	"strings"
)

// AdminCommenter sets a job's AdminComment (an operator's note on the job:
// squeue, sacct and scontrol show it; users cannot change it). A separate
// interface from Client: burst uses it where it records why it acted on a
// running job (internal/interruption).
type AdminCommenter interface {
	SetAdminComment(ctx context.Context, jobID uint32, text string) error
}

var _ AdminCommenter = (*Scontrol)(nil)

// MaxAdminComment bounds what burst writes (Slurm itself takes more).
const MaxAdminComment = 1024

// SetAdminComment implements AdminCommenter: scontrol update jobid=N
// admincomment=TEXT (on a pending or running job; needs an operator or
// root).
func (s *Scontrol) SetAdminComment(ctx context.Context, jobID uint32, text string) error {
	if strings.ContainsAny(text, "\r\n\x00") || len(text) > MaxAdminComment {
		return fmt.Errorf("setting the admin comment of job %d: %d bytes with a newline or NUL, or over %d", jobID, len(text), MaxAdminComment)
	}
	if _, err := s.run(ctx, "scontrol", "update", "jobid="+jobArg(jobID), "admincomment="+text); err != nil {
		return fmt.Errorf("setting the admin comment of job %d: %w", jobID, err)
	}
	return nil
}
