package slurm

import (
	"errors"
	"testing"
)

// TestClassify: Slurm's numbers and its messages (slurm_strerror, as
// scontrol prints them and slurmrestd returns them) map to one error each.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		errno int
		text  string
		want  error
	}{
		{2017, "", ErrNotFound},
		{0, "slurm_load_jobs error: Invalid job id specified", ErrNotFound},
		{2018, "", ErrNotFound},
		{2002, "", ErrAccessDenied},
		{0, "Access/permission denied for job 5", ErrAccessDenied},
		{1007, "", ErrAuth},
		{6002, "", ErrAuth},
		{0, "Requeue of JobId=1 returned an error: Job is pending execution", ErrJobPending},
		{0, "scontrol: error: Job is pending execution", ErrJobPending},
		{0, "Unspecified error", nil},
		{2100, "Job has already finished", nil},
	} {
		got := Classify(c.errno, c.text)
		if c.want == nil && got != nil || c.want != nil && !errors.Is(got, c.want) {
			t.Errorf("Classify(%d, %q) = %v, want %v", c.errno, c.text, got, c.want)
		}
	}
}
