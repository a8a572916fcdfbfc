// Package ec2emu is an EC2 emulator for burst's tests and demo: an HTTP
// server speaking the EC2 Query protocol (API version 2016-11-15) so that the
// real aws-sdk-go-v2 client, with its serialisation, retries and error
// decoding, runs against it, plus a per-instance instance-metadata service
// (IMDSv2).
//
// # Actions
//
// CreateFleet (type instant), RunInstances, DescribeInstances,
// TerminateInstances, CreateTags, DescribeSpotPriceHistory,
// DescribeInstanceTypes, CreateLaunchTemplate and DescribeLaunchTemplates.
// Requests must carry an Authorization header (SigV4 is accepted without
// checking the signature) and Version=2016-11-15. Responses are EC2's XML in
// the 2016-11-15 namespace; errors are EC2 error documents
// (<Response><Errors><Error><Code>...).
//
// # Model
//
//   - Capacity per pool (instance type x zone x capacity type): unlimited
//     until SetCapacity limits it; a launch takes from the pool and a
//     termination gives back. A dry pool yields InsufficientInstanceCapacity.
//   - The instance-launch token bucket shared by RunInstances and CreateFleet:
//     Options.BucketSize tokens (default 1,000) refilled at
//     Options.BucketRefill per second (default 2); a call needing more tokens
//     than are left fails with RequestLimitExceeded (HTTP 503).
//   - Time: every duration (latency, boot, shutdown, bucket refill, the
//     two-minute interruption notice) is emulated time, which runs
//     Options.TimeScale times faster than the wall clock.
//   - States: pending -> running after BootDelay -> shutting-down on
//     termination -> terminated after ShutdownDelay. OnStart is called when an
//     instance enters running, OnStop when it leaves it.
//   - ClientToken: a repeated RunInstances/CreateFleet/CreateLaunchTemplate
//     with the same token and parameters gets the first call's response and
//     launches nothing; different parameters get IdempotentParameterMismatch.
//   - Faults: InjectFault makes calls fail with a chosen code (next N calls,
//     or a fraction of calls for a while), before or after taking effect.
//   - Every call is recorded (Calls, Actions).
//
// # Instance metadata
//
// Each instance has its own IMDS listener on 127.0.0.1 (a separate port, so
// the SDK's imds client works unchanged: it always requests absolute paths
// such as /latest/api/token). The listener starts when first asked for with
// IMDSURL, or before OnStart is called (Instance.IMDSURL), and stops when
// the instance terminates. An agent is given that URL as its IMDS endpoint.
// It serves IMDSv2 only (PUT /latest/api/token first), /latest/user-data,
// /latest/meta-data/{instance-id,instance-type,local-ipv4,ami-launch-index,
// instance-life-cycle,placement/availability-zone}, tags/instance[/<key>]
// when the launch enabled InstanceMetadataTags, spot/instance-action (404
// until Interrupt) and events/recommendations/rebalance (404 until
// Rebalance).
package ec2emu

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
)

// Namespace is the XML namespace of EC2 API version 2016-11-15.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// APIVersion is the only EC2 API version the emulator speaks.
const APIVersion = "2016-11-15"

// Options configures a Server. Zero values take the defaults noted.
type Options struct {
	Region string // default "us-east-1"
	// Subnets maps subnet id -> availability zone. Default: subnet-a, subnet-b,
	// subnet-c in <Region>a, b, c.
	Subnets map[string]string
	// TimeScale: emulated seconds per wall-clock second (default 1).
	TimeScale float64
	// Latency is added to every API call (emulated time).
	Latency time.Duration
	// BootDelay is pending -> running (emulated; default 5s; negative = at once).
	BootDelay time.Duration
	// ShutdownDelay is shutting-down -> terminated (emulated; default 5s; negative = at once).
	ShutdownDelay time.Duration
	// NoticePeriod is how long a spot interruption notice precedes the
	// termination (emulated; default 2 minutes, as EC2).
	NoticePeriod time.Duration
	// BucketSize is the instance-launch token bucket (default 1000; negative disables it).
	BucketSize int
	// BucketRefill is tokens added per emulated second (default 2).
	BucketRefill float64
	// SpotInstanceLimit caps live spot instances (MaxSpotInstanceCountExceeded); 0 = none.
	SpotInstanceLimit int
	// OnDemandInstanceLimit caps live on-demand instances (InstanceLimitExceeded); 0 = none.
	OnDemandInstanceLimit int
	// AllocateIP gives a new instance its private IP; default 10.0.x.y in order.
	AllocateIP func(Instance) (string, error)
	// ReleaseIP is called when an instance reaches terminated.
	ReleaseIP func(Instance)
	// OnStart is called (in its own goroutine) when an instance enters
	// running; Instance.IMDSURL is set.
	OnStart func(Instance)
	// OnStop is called (in its own goroutine) when an instance leaves running.
	OnStop func(Instance)
	// Catalog supplies instance types and spot prices (default catalog.Default()).
	Catalog *catalog.Catalog
	// SpotPrice overrides the spot price of a type in a zone (USD/hour).
	SpotPrice func(instanceType, zone string) float64
	Logger    *slog.Logger
	// IMDSHost is the address instance metadata listeners bind (default
	// 127.0.0.1); the end-to-end harness uses its bridge address so agents
	// inside node network namespaces reach their metadata.
	IMDSHost string
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
	LaunchTime     time.Time
	LaunchIndex    int
	Tags           map[string]string
	UserData       []byte // decoded user data
	MetadataTags   bool   // InstanceMetadataTags enabled
	LaunchTemplate string // launch template id, "" for RunInstances without one
	ClientToken    string
	PlacementGroup string
	IMDSURL        string // "" until the IMDS listener is started
}

// Call is one recorded API call.
type Call struct {
	Action string
	Params url.Values
	Code   string // error code returned, "" on success
	At     time.Time
}

// Fault makes calls fail.
type Fault struct {
	Action   string        // action to fail; "" = any
	Code     string        // EC2 error code, e.g. "RequestLimitExceeded"
	Message  string        // default "injected fault"
	Status   int           // HTTP status; default from the code
	Count    int           // fail the next Count matching calls ...
	Fraction float64       // ... or this fraction of matching calls
	For      time.Duration // ... while the fault lasts (emulated; 0 = until removed or Count used)
	// AfterEffect performs the call and then returns the error (a lost
	// response): the client's retry must not duplicate its effect.
	AfterEffect bool
}

type fault struct {
	Fault
	until time.Time
	left  int
}

type poolKey struct{ typ, zone, capacity string }

type instance struct {
	Instance
	reservation string
	notice      *time.Time // spot interruption time
	rebalance   *time.Time
	imds        *imdsServer
	hookTail    chan struct{} // closed when the instance's last hook returned
	hooks       sync.WaitGroup
}

type launchTemplate struct {
	ID, Name     string
	ImageID      string
	InstanceType string
	UserData     []byte
	Profile      string
	SGs          []string
	MetadataTags bool
	HTTPTokens   string
	TagSpecs     map[string]map[string]string // resource type -> tags
	Tags         map[string]string
	Created      time.Time
}

type idemEntry struct {
	hash string
	body []byte
}

// Server is the emulator.
type Server struct {
	opts  Options
	log   *slog.Logger
	start time.Time
	ln    net.Listener
	http  *http.Server

	mu        sync.Mutex
	instances map[string]*instance
	order     []*instance
	capacity  map[poolKey]int
	tokens    float64
	tokensAt  time.Time
	faults    []*fault
	calls     []Call
	idem      map[string]idemEntry
	templates map[string]*launchTemplate // by id
	seq       int
	ipSeq     int
	closed    bool
	rng       *rand.Rand
	wg        sync.WaitGroup
	hooks     sync.WaitGroup
}

// New builds a server; call Start to listen.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Subnets == nil {
		opts.Subnets = map[string]string{"subnet-a": opts.Region + "a", "subnet-b": opts.Region + "b", "subnet-c": opts.Region + "c"}
	}
	if opts.TimeScale <= 0 {
		opts.TimeScale = 1
	}
	if opts.BootDelay == 0 {
		opts.BootDelay = 5 * time.Second
	}
	if opts.ShutdownDelay == 0 {
		opts.ShutdownDelay = 5 * time.Second
	}
	if opts.NoticePeriod <= 0 {
		opts.NoticePeriod = 2 * time.Minute
	}
	if opts.BucketSize == 0 {
		opts.BucketSize = 1000
	}
	if opts.BucketRefill <= 0 {
		opts.BucketRefill = 2
	}
	if opts.Catalog == nil {
		opts.Catalog = catalog.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts: opts, log: opts.Logger, start: time.Now(),
		instances: map[string]*instance{}, capacity: map[poolKey]int{},
		idem: map[string]idemEntry{}, templates: map[string]*launchTemplate{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
	}
	s.tokens = float64(opts.BucketSize)
	s.tokensAt = s.Now()
	return s
}

// Start listens on 127.0.0.1 at a random port.
func (s *Server) Start() error {
	return s.StartAddr("127.0.0.1:0")
}

// StartAddr listens on addr.
func (s *Server) StartAddr(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("starting ec2 emulator on %s: %w", addr, err)
	}
	s.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc(ControlPrefix, s.serveControl)
	mux.HandleFunc("/", s.serveAPI)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.http.Serve(ln) }()
	return nil
}

// URL is the API endpoint, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the API and every IMDS listener, and waits for hooks that are
// running. OnStop is not called for instances still running: the test that
// started something in OnStart cleans it up itself.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var imds []*imdsServer
	for _, in := range s.order {
		if in.imds != nil {
			imds = append(imds, in.imds)
			in.imds = nil
		}
	}
	s.mu.Unlock()
	for _, m := range imds {
		m.close()
	}
	var err error
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = s.http.Shutdown(ctx)
	}
	s.wg.Wait()
	s.hooks.Wait()
	return err
}

// Now is the emulated time.
func (s *Server) Now() time.Time {
	real := time.Since(s.start)
	return s.start.Add(time.Duration(float64(real) * s.opts.TimeScale))
}

// Real converts an emulated duration to wall-clock time.
func (s *Server) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.opts.TimeScale)
}

// after runs f after the emulated duration d; callbacks check s.closed.
func (s *Server) after(d time.Duration, f func()) {
	if d < 0 {
		d = 0
	}
	time.AfterFunc(s.Real(d), f)
}

// SetCapacity limits pool type x zone x capacity ("spot" or "on-demand") to
// n more instances; n < 0 makes it unlimited again.
func (s *Server) SetCapacity(instanceType, zone, capacity string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := poolKey{instanceType, zone, capacity}
	if n < 0 {
		delete(s.capacity, k)
		return
	}
	s.capacity[k] = n
}

// Capacity returns the pool's free capacity, -1 when unlimited.
func (s *Server) Capacity(instanceType, zone, capacity string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.capacity[poolKey{instanceType, zone, capacity}]; ok {
		return n
	}
	return -1
}

// SetTokens sets the launch token bucket's level (e.g. 0 to start drained).
func (s *Server) SetTokens(n float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refill()
	s.tokens = n
}

// Tokens returns the bucket's level.
func (s *Server) Tokens() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refill()
	return s.tokens
}

func (s *Server) refill() {
	now := s.Now()
	if s.opts.BucketSize < 0 {
		return
	}
	s.tokens += now.Sub(s.tokensAt).Seconds() * s.opts.BucketRefill
	if s.tokens > float64(s.opts.BucketSize) {
		s.tokens = float64(s.opts.BucketSize)
	}
	s.tokensAt = now
}

// takeTokens takes n launch tokens or reports false; s.mu held.
func (s *Server) takeTokens(n int) bool {
	if s.opts.BucketSize < 0 {
		return true
	}
	s.refill()
	if s.tokens < float64(n) {
		return false
	}
	s.tokens -= float64(n)
	return true
}

// InjectFault adds a fault; the returned func removes it.
func (s *Server) InjectFault(f Fault) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ff := &fault{Fault: f, left: f.Count}
	if f.For > 0 {
		ff.until = s.Now().Add(f.For)
	}
	s.faults = append(s.faults, ff)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.faults {
			if x == ff {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
				return
			}
		}
	}
}

// pickFault returns the fault that hits this call, if any; s.mu held.
func (s *Server) pickFault(action string) *fault {
	now := s.Now()
	live := s.faults[:0]
	var hit *fault
	for _, f := range s.faults {
		expired := (!f.until.IsZero() && now.After(f.until)) || (f.Count > 0 && f.left <= 0)
		if expired {
			continue
		}
		live = append(live, f)
		if hit != nil || (f.Action != "" && f.Action != action) {
			continue
		}
		switch {
		case f.Count > 0:
			f.left--
			hit = f
		case f.Fraction > 0:
			if s.rng.Float64() < f.Fraction {
				hit = f
			}
		default:
			hit = f
		}
	}
	s.faults = live
	return hit
}

// Calls returns every recorded call, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts recorded calls of one action ("" = all).
func (s *Server) CallCount(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if action == "" || c.Action == action {
			n++
		}
	}
	return n
}

// Actions returns the distinct actions called, sorted.
func (s *Server) Actions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range s.calls {
		seen[c.Action] = true
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Instances returns every instance ever launched (terminated included), in
// launch order.
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

func (in *instance) snapshot() Instance {
	c := in.Instance
	c.Tags = make(map[string]string, len(in.Tags))
	for k, v := range in.Tags {
		c.Tags[k] = v
	}
	return c
}

// LaunchTemplateSpec describes a launch template an admin created beforehand.
type LaunchTemplateSpec struct {
	Name         string
	ImageID      string
	UserData     []byte // raw
	MetadataTags bool   // InstanceMetadataTags=enabled
	Tags         map[string]string
}

// AddLaunchTemplate creates a launch template as if an admin had, and
// returns its id.
func (s *Server) AddLaunchTemplate(spec LaunchTemplateSpec) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := &launchTemplate{ID: s.newID("lt-"), Name: spec.Name, ImageID: spec.ImageID, UserData: spec.UserData,
		MetadataTags: spec.MetadataTags, HTTPTokens: "required", Tags: spec.Tags, Created: s.Now(),
		TagSpecs: map[string]map[string]string{}}
	s.templates[lt.ID] = lt
	return lt.ID
}

func (s *Server) newID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%017x", prefix, 0x0b00000000000000+s.seq)
}

func (s *Server) allocIP(in Instance) (string, error) {
	if s.opts.AllocateIP != nil {
		return s.opts.AllocateIP(in)
	}
	s.ipSeq++
	n := s.ipSeq + 9
	return fmt.Sprintf("10.%d.%d.%d", (n>>16)&0xff, (n>>8)&0xff, n&0xff), nil
}

// launch creates one instance in pending state; s.mu held. Capacity and
// tokens were taken by the caller.
func (s *Server) launch(in *instance) {
	in.ID = s.newID("i-")
	in.State = "pending"
	in.LaunchTime = s.Now().Truncate(time.Second)
	s.instances[in.ID] = in
	s.order = append(s.order, in)
	id := in.ID
	s.after(s.opts.BootDelay, func() { s.toRunning(id) })
}

func (s *Server) toRunning(id string) {
	s.mu.Lock()
	in := s.instances[id]
	if in == nil || in.State != "pending" || s.closed {
		s.mu.Unlock()
		return
	}
	in.State = "running"
	hook := s.opts.OnStart
	if hook != nil {
		if _, err := s.startIMDS(in); err != nil {
			s.log.Error("starting instance metadata service", "instance", id, "err", err)
		}
	}
	if hook != nil {
		s.runHook(in, hook)
	}
	s.mu.Unlock()
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

// terminate moves a live instance to shutting-down; s.mu held. It returns the
// previous state.
func (s *Server) terminate(in *instance) string {
	prev := in.State
	if prev == "shutting-down" || prev == "terminated" {
		return prev
	}
	in.State = "shutting-down"
	if prev == "running" && s.opts.OnStop != nil && !s.closed {
		s.runHook(in, s.opts.OnStop)
	}
	id := in.ID
	s.after(s.opts.ShutdownDelay, func() { s.toTerminated(id) })
	return prev
}

func (s *Server) toTerminated(id string) {
	s.mu.Lock()
	in := s.instances[id]
	if in == nil || in.State != "shutting-down" || s.closed {
		s.mu.Unlock()
		return
	}
	in.State = "terminated"
	k := poolKey{in.InstanceType, in.Zone, in.Lifecycle}
	if n, ok := s.capacity[k]; ok {
		s.capacity[k] = n + 1
	}
	m := in.imds
	in.imds = nil
	snap := in.snapshot()
	rel := s.opts.ReleaseIP
	s.mu.Unlock()
	if m != nil {
		m.close()
	}
	if rel != nil {
		rel(snap)
	}
}

// liveCount counts live instances of a lifecycle; s.mu held.
func (s *Server) liveCount(lifecycle string) int {
	n := 0
	for _, in := range s.order {
		if in.Lifecycle == lifecycle && (in.State == "pending" || in.State == "running") {
			n++
		}
	}
	return n
}

// Interrupt issues a spot interruption notice for a running spot instance:
// its IMDS serves spot/instance-action for NoticePeriod, then the instance
// is terminated.
func (s *Server) Interrupt(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return fmt.Errorf("interrupting %s: no such instance", id)
	}
	if in.Lifecycle != "spot" {
		return fmt.Errorf("interrupting %s: it is %s, only spot instances get interruption notices", id, in.Lifecycle)
	}
	if in.State != "pending" && in.State != "running" {
		return fmt.Errorf("interrupting %s: it is %s", id, in.State)
	}
	t := s.Now().Add(s.opts.NoticePeriod).UTC().Truncate(time.Second)
	in.notice = &t
	s.after(s.opts.NoticePeriod, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed && (in.State == "pending" || in.State == "running") {
			s.terminate(in)
		}
	})
	return nil
}

// Rebalance issues an EC2 rebalance recommendation for an instance.
func (s *Server) Rebalance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return fmt.Errorf("rebalance for %s: no such instance", id)
	}
	t := s.Now().UTC().Truncate(time.Second)
	in.rebalance = &t
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

func (s *Server) zoneOf(subnet string) (string, bool) {
	z, ok := s.opts.Subnets[subnet]
	return z, ok
}

func (s *Server) firstSubnet(zone string) string {
	var ids []string
	for id, z := range s.opts.Subnets {
		if zone == "" || z == zone {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func (s *Server) spotPrice(typ, zone string) float64 {
	if s.opts.SpotPrice != nil {
		return s.opts.SpotPrice(typ, zone)
	}
	t, ok := s.opts.Catalog.Lookup(typ)
	if !ok {
		return 0
	}
	p := t.SpotUSD()
	if p == 0 {
		p = t.OnDemandUSD * 0.4
	}
	// A small, stable per-zone spread, as real spot markets differ by zone.
	if zone != "" {
		p *= 1 + 0.03*float64(zone[len(zone)-1]-'a')
	}
	return p
}
