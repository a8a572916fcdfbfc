package reconcile

// Kick asks Run for a pass now (an EC2 state-change event said an instance
// stopped or terminated) instead of at the next interval. Kicks while a pass
// is due are merged into one; it never blocks.
func (r *Reconciler) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}
