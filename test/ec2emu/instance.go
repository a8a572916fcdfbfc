package ec2emu

import (
	"fmt"
	"time"
)

// MetadataOptions are an instance's instance-metadata settings, from
// RunInstances MetadataOptions or its launch template's, as DescribeInstances
// reports them.
type MetadataOptions struct {
	HTTPTokens              string // "required" (the emulator's default, as for an ImdsSupport v2.0 AMI) or "optional"
	HTTPPutResponseHopLimit int    // 1..64 (default 2, as for an ImdsSupport v2.0 AMI)
	HTTPEndpoint            string // "enabled" (default) or "disabled"
	HTTPProtocolIPv6        string // "disabled" (default) or "enabled"
	InstanceMetadataTags    string // "disabled" (default) or "enabled"
}

func defaultMetadataOptions() MetadataOptions {
	return MetadataOptions{HTTPTokens: "required", HTTPPutResponseHopLimit: 2, HTTPEndpoint: "enabled",
		HTTPProtocolIPv6: "disabled", InstanceMetadataTags: "disabled"}
}

// Instance is an emulated instance as hooks and tests see it.
type Instance struct {
	ID             string
	InstanceType   string
	ImageID        string
	Zone           string
	SubnetID       string
	Lifecycle      string // "spot" or "on-demand"
	PrivateIP      string
	State          string
	LaunchTime     time.Time // the last launch or start (pending), as DescribeInstances
	LaunchIndex    int
	Tags           map[string]string
	UserData       []byte // decoded user data
	MetadataTags   bool   // MetadataOptions.InstanceMetadataTags == "enabled"
	LaunchTemplate string // launch template id, "" for RunInstances without one
	ClientToken    string
	PlacementGroup string
	// NetworkInterfaces are the interfaces its launch asked for (efa.go);
	// nil for the default single interface.
	NetworkInterfaces []NetworkInterface
	IMDSURL           string // "" until the IMDS listener is started
	// CapacityReservation is the On-Demand Capacity Reservation the
	// instance runs in ("" for none); see reservations.go.
	CapacityReservation string

	MetadataOptions MetadataOptions
	// ShutdownBehavior is InstanceInitiatedShutdownBehavior: "stop"
	// (EC2's default) or "terminate".
	ShutdownBehavior string
	// StateReasonCode and StateReasonMessage are EC2's StateReason of the
	// last stop or termination, e.g. "Client.UserInitiatedShutdown".
	StateReasonCode    string
	StateReasonMessage string
	// StateTransitionReason is EC2's, e.g. "User initiated (2026-12-01
	// 10:00:00 GMT)": the time the instance began to stop or terminate.
	StateTransitionReason string
	Starts                int       // times it entered running
	TerminatedAt          time.Time // zero until terminated
}

type instance struct {
	Instance
	reservation string
	notice      *time.Time       // spot interruption time
	scheduled   []ScheduledEvent // scheduled events still to come (scheduled.go)
	rebalance   *time.Time
	imds        *imdsServer
	hookTail    chan struct{} // closed when the instance's last hook returned
	holds       bool          // holds a slot of its pool's capacity
	gen         int           // bumped by every scheduled transition; stale timers see a newer one
	seg         *BillLine     // the open running segment
	changedAt   time.Time     // when it entered State, whole seconds
}

// enter moves the instance to a state and returns the time of the
// transition, which the event, the bill and the state reason all use.
func (s *Server) enter(in *instance, state string) time.Time {
	in.State = state
	in.changedAt = s.Now().Truncate(time.Second)
	return in.changedAt
}

// cause is who stopped or terminated an instance.
type cause int

const (
	byUser           cause = iota // the EC2 API
	bySpot                        // EC2 reclaiming spot capacity
	byInstance                    // the instance's own operating system (poweroff)
	byHost                        // the instance's host failing (Crash)
	byScheduledEvent              // a scheduled retirement or stop reaching its time (scheduled.go)
	byBlockEnd                    // its Capacity Block ending (capblocks.go)
)

// reason returns EC2's StateReason code and message and the
// StateTransitionReason for a transition at t.
func (c cause) reason(t time.Time) (code, msg, transition string) {
	stamp := " (" + t.UTC().Format("2006-01-02 15:04:05") + " GMT)"
	switch c {
	case bySpot:
		return "Server.SpotInstanceTermination", "Server.SpotInstanceTermination: Spot instance termination", "Service initiated" + stamp
	case byScheduledEvent:
		return "Server.ScheduledStop", "Server.ScheduledStop: Stopped due to scheduled retirement", "Service initiated" + stamp
	case byHost:
		return "Server.InternalError", "Server.InternalError: Internal error on launch", "Server initiated" + stamp
	case byBlockEnd:
		return "Server.ScheduledStop", "Server.ScheduledStop: Capacity Block ending", "Service initiated" + stamp
	case byInstance:
		return "Client.InstanceInitiatedShutdown", "Client.InstanceInitiatedShutdown: Instance initiated shutdown", "User initiated" + stamp
	}
	return "Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown", "User initiated" + stamp
}

func (in *instance) setReason(c cause, t time.Time) {
	in.StateReasonCode, in.StateReasonMessage, in.StateTransitionReason = c.reason(t)
}

func (in *instance) clearReason() {
	in.StateReasonCode, in.StateReasonMessage, in.StateTransitionReason = "", "", ""
}

func (in *instance) live() bool { return in.State == "pending" || in.State == "running" }

func (in *instance) snapshot() Instance {
	c := in.Instance
	c.Tags = make(map[string]string, len(in.Tags))
	for k, v := range in.Tags {
		c.Tags[k] = v
	}
	c.MetadataTags = c.MetadataOptions.InstanceMetadataTags == "enabled"
	return c
}

// Instances returns every instance ever launched (terminated included, even
// past TerminatedRetention), in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.order))
	for _, in := range s.order {
		out = append(out, in.snapshot())
	}
	return out
}

// Live returns instances that are pending or running.
func (s *Server) Live() []Instance {
	var out []Instance
	for _, in := range s.Instances() {
		if in.State == "pending" || in.State == "running" {
			out = append(out, in)
		}
	}
	return out
}

// Instance returns one instance.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return in.snapshot(), true
}

// visible reports whether the API still shows the instance; s.mu held.
func (s *Server) visible(in *instance) bool {
	if in.State != "terminated" || s.opts.TerminatedRetention < 0 {
		return true
	}
	return s.Now().Sub(in.TerminatedAt) < s.opts.TerminatedRetention
}

// lookup finds an instance the API still shows; s.mu held.
func (s *Server) lookup(id string) *instance {
	in := s.instances[id]
	if in == nil || !s.visible(in) {
		return nil
	}
	return in
}

// schedule runs f on the instance after the emulated duration d unless
// another transition was scheduled meanwhile. f runs with s.mu held and may
// return work to do after it is released.
func (s *Server) schedule(in *instance, d time.Duration, f func(*instance) func()) {
	in.gen++
	gen := in.gen
	s.after(d, func() {
		s.mu.Lock()
		if s.closed || in.gen != gen {
			s.mu.Unlock()
			return
		}
		post := f(in)
		s.mu.Unlock()
		if post != nil {
			post()
		}
	})
}

// launch creates one instance in pending state; s.mu held. Capacity and
// tokens were taken by the caller.
func (s *Server) launch(in *instance) {
	in.ID = s.newID("i-")
	in.LaunchTime = s.enter(in, "pending")
	in.holds = true
	if in.ShutdownBehavior == "" {
		in.ShutdownBehavior = "stop"
	}
	s.instances[in.ID] = in
	s.order = append(s.order, in)
	s.emitState(in)
	s.schedule(in, s.opts.BootDelay, s.toRunning)
}

func (s *Server) toRunning(in *instance) func() {
	if in.State != "pending" {
		return nil
	}
	s.enter(in, "running")
	in.Starts++
	s.openSegment(in)
	s.emitState(in)
	if hook := s.opts.OnStart; hook != nil {
		if _, err := s.startIMDS(in); err != nil {
			s.log.Error("starting instance metadata service", "instance", in.ID, "err", err)
		}
		s.runHook(in, hook)
	}
	return nil
}

// runHook calls f for the instance in its own goroutine, after the
// instance's previous hook returned (OnStop never overtakes OnStart); s.mu
// held. Close waits for running hooks.
func (s *Server) runHook(in *instance, f func(Instance)) {
	snap := in.snapshot()
	prev := in.hookTail
	done := make(chan struct{})
	in.hookTail = done
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		f(snap)
	}()
}

// leaveRunning ends the running segment of an instance whose State was just
// set to where it goes (stopping or shutting-down), and calls OnStop.
func (s *Server) leaveRunning(in *instance, wasRunning bool) {
	if !wasRunning {
		return
	}
	s.closeSegment(in)
	if s.opts.OnStop != nil && !s.closed {
		s.runHook(in, s.opts.OnStop)
	}
}

// terminate moves an instance to shutting-down; s.mu held. It returns the
// previous state.
func (s *Server) terminate(in *instance, c cause) string {
	prev := in.State
	if prev == "shutting-down" || prev == "terminated" {
		return prev
	}
	now := s.enter(in, "shutting-down")
	in.setReason(c, now)
	if c == bySpot && in.seg != nil && now.Sub(in.seg.Start) < time.Hour {
		in.seg.Waived = true
	}
	s.leaveRunning(in, prev == "running")
	s.emitState(in)
	s.schedule(in, s.opts.ShutdownDelay, s.toTerminated)
	return prev
}

func (s *Server) toTerminated(in *instance) func() {
	if in.State != "shutting-down" {
		return nil
	}
	in.TerminatedAt = s.enter(in, "terminated")
	if in.holds {
		s.giveBack(in.InstanceType, in.Zone, in.Lifecycle)
		in.holds = false
	}
	s.emitState(in)
	m := in.imds
	in.imds = nil
	snap := in.snapshot()
	rel := s.opts.ReleaseIP
	return func() {
		if m != nil {
			m.close()
		}
		if rel != nil {
			rel(snap)
		}
	}
}

// stop moves a running instance to stopping; s.mu held.
func (s *Server) stop(in *instance, c cause) {
	in.setReason(c, s.enter(in, "stopping"))
	s.leaveRunning(in, true)
	s.emitState(in)
	s.schedule(in, s.opts.StopDelay, s.toStopped)
}

func (s *Server) toStopped(in *instance) func() {
	if in.State != "stopping" {
		return nil
	}
	s.enter(in, "stopped")
	if in.holds {
		s.giveBack(in.InstanceType, in.Zone, in.Lifecycle)
		in.holds = false
	}
	in.notice, in.rebalance = nil, nil
	if in.imds != nil {
		in.imds.forgetTokens()
	}
	s.emitState(in)
	return nil
}

// startStopped moves a stopped instance to pending; s.mu held, capacity
// checked by the caller.
func (s *Server) startStopped(in *instance) {
	s.consume(in.InstanceType, in.Zone, in.Lifecycle)
	in.holds = true
	in.LaunchTime = s.enter(in, "pending")
	in.clearReason()
	s.emitState(in)
	s.schedule(in, s.opts.StartDelay, s.toRunning)
}

// liveCount counts live instances of a lifecycle; s.mu held.
func (s *Server) liveCount(lifecycle string) int {
	n := 0
	for _, in := range s.order {
		if in.Lifecycle == lifecycle && in.live() {
			n++
		}
	}
	return n
}

// Interrupt issues a spot interruption notice for a running spot instance:
// its IMDS serves spot/instance-action and EventBridge gets an "EC2 Spot
// Instance Interruption Warning"; after NoticePeriod EC2 terminates it
// (Server.SpotInstanceTermination, "Service initiated (...)").
func (s *Server) Interrupt(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.lookup(id)
	if in == nil {
		return fmt.Errorf("interrupting %s: no such instance", id)
	}
	if in.Lifecycle != "spot" {
		return fmt.Errorf("interrupting %s: it is %s, only spot instances get interruption notices", id, in.Lifecycle)
	}
	if !in.live() {
		return fmt.Errorf("interrupting %s: it is %s", id, in.State)
	}
	t := s.Now().Add(s.opts.NoticePeriod).UTC().Truncate(time.Second)
	in.notice = &t
	s.emit(DetailSpotInterruption, in, EventDetail{InstanceID: in.ID, InstanceAction: "terminate"})
	s.after(s.opts.NoticePeriod, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed && in.live() {
			s.terminate(in, bySpot)
		}
	})
	return nil
}

// Rebalance issues an EC2 rebalance recommendation for an instance: IMDS
// events/recommendations/rebalance and an "EC2 Instance Rebalance
// Recommendation" event.
func (s *Server) Rebalance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.lookup(id)
	if in == nil {
		return fmt.Errorf("rebalance for %s: no such instance", id)
	}
	if !in.live() {
		return fmt.Errorf("rebalance for %s: it is %s", id, in.State)
	}
	t := s.Now().UTC().Truncate(time.Second)
	in.rebalance = &t
	s.emit(DetailRebalance, in, EventDetail{InstanceID: in.ID})
	return nil
}

// Shutdown is the instance's operating system powering off (poweroff,
// shutdown -h): with InstanceInitiatedShutdownBehavior=terminate the
// instance terminates, with stop it stops; a spot instance (the emulator's
// are one-time requests, which cannot be stopped) terminates either way.
// StateReason is Client.InstanceInitiatedShutdown.
func (s *Server) Shutdown(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.lookup(id)
	if in == nil {
		return fmt.Errorf("shutting down %s: no such instance", id)
	}
	if in.State != "running" {
		return fmt.Errorf("shutting down %s: its operating system is not running (%s)", id, in.State)
	}
	if in.ShutdownBehavior == "terminate" || in.Lifecycle == "spot" {
		s.terminate(in, byInstance)
	} else {
		s.stop(in, byInstance)
	}
	return nil
}

// IMDSURL starts (once) and returns the instance's metadata endpoint.
func (s *Server) IMDSURL(id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return "", fmt.Errorf("metadata endpoint for %s: no such instance", id)
	}
	return s.startIMDS(in)
}
