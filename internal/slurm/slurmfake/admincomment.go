package slurmfake

import (
	"context"
	"fmt"

	"github.com/burst-hpc/burst/internal/slurm"
)

var _ slurm.AdminCommenter = (*Slurm)(nil)

// SetAdminComment implements slurm.AdminCommenter: logged as "admincomment
// ID TEXT" and kept on the job.
func (s *Slurm) SetAdminComment(_ context.Context, id uint32, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log("admincomment %d %s", id, text)
	i := s.jobIndex(id)
	if i < 0 {
		return fmt.Errorf("setting the admin comment of job %d: %w", id, slurm.ErrNotFound)
	}
	s.jobs[i].AdminComment = text
	return nil
}
