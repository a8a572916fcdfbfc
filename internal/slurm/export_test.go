package slurm

// ForgetVersion drops the detected versions, as a new process would start
// without them (benchmarks count the detection of each burst process).
func ForgetVersion() {
	detected.mu.Lock()
	detected.m = nil
	detected.mu.Unlock()
}

// DiffJobs names the fields where two Jobs differ (jobstext_test.go).
var DiffJobs = diffJobs

// JSONFlag returns the --json option burst passes to squeue and scontrol on
// release v ("--json=v0.0.42"; 22.05: "--json").
func JSONFlag(v Version) (string, error) {
	d, err := dialectFor(v)
	if err != nil {
		return "", err
	}
	return d.jsonFlag(), nil
}
