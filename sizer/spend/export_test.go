package spend

// WorkOf is what r's tallies have cost so far.
func WorkOf(r *Reader) Work {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.work
}
