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
