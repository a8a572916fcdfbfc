package usage

// ReadOf is how many jobs r has read from the store so far.
func ReadOf(r *Reader) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read
}
