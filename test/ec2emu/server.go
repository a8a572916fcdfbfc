package ec2emu

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/test/ec2emu/awsmodel"
)

// Namespace is the XML namespace of EC2 API version 2016-11-15.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// APIVersion is the only EC2 API version the emulator speaks.
const APIVersion = "2016-11-15"

// DefaultAccount is the account id the emulator reports unless
// Options.Account says otherwise.
const DefaultAccount = "123456789012"

// Options configures a Server. Zero values take the defaults noted.
type Options struct {
	Region  string // default "us-east-1"
	Account string // account id in ARNs, events and identity documents; default DefaultAccount
	// Subnets maps subnet id -> availability zone. Default: subnet-a, subnet-b,
	// subnet-c in <Region>a, b, c.
	Subnets map[string]string
	// SecurityGroups and Images are the security group and AMI ids that
	// exist (DescribeSecurityGroups, DescribeImages); default none.
	SecurityGroups []string
	Images         []string
	// TimeScale: emulated seconds per wall-clock second (default 1).
	TimeScale float64
	// Latency is added to every API call (emulated time).
	Latency time.Duration
	// BootDelay is pending -> running after a launch (emulated; default 5s;
	// negative = at once).
	BootDelay time.Duration
	// ShutdownDelay is shutting-down -> terminated (emulated; default 5s; negative = at once).
	ShutdownDelay time.Duration
	// StopDelay is stopping -> stopped (emulated; default ShutdownDelay).
	StopDelay time.Duration
	// StartDelay is pending -> running after StartInstances (emulated;
	// default half of BootDelay: a start skips the launch; negative = at once).
	StartDelay time.Duration
	// TerminatedRetention is how long a terminated instance stays visible to
	// DescribeInstances (emulated; default 1 hour, as EC2; negative = forever).
	TerminatedRetention time.Duration
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
	// LaunchIndexes chooses the ami-launch-index of fleet instances
	// (default LaunchIndexSequential).
	LaunchIndexes LaunchIndexMode
	// AllocateIP gives a new instance its private IP; default 10.0.x.y in order.
	AllocateIP func(Instance) (string, error)
	// ReleaseIP is called when an instance reaches terminated.
	ReleaseIP func(Instance)
	// OnStart is called (in its own goroutine) when an instance enters
	// running, after a launch or a StartInstances (Instance.Starts counts
	// them); Instance.IMDSURL is set.
	OnStart func(Instance)
	// OnStop is called (in its own goroutine) when an instance leaves
	// running: Instance.State is "stopping" or "shutting-down".
	OnStop func(Instance)
	// Catalog supplies instance types and prices (default catalog.Default()).
	Catalog *catalog.Catalog
	// SpotPrice overrides the spot price of a type in a zone (USD/hour).
	SpotPrice func(instanceType, zone string) float64
	Logger    *slog.Logger
	// IMDSHost is the address instance metadata listeners bind (default
	// 127.0.0.1); the end-to-end harness uses its bridge address so agents
	// inside node network namespaces reach their metadata.
	IMDSHost string
	// IMDSHostFor, when set, is the address each instance's metadata
	// listener binds, instead of IMDSHost: instances on several networks
	// (test/stack's clusters sharing one emulator). It is called with the
	// emulator's lock held and must not call the emulator.
	IMDSHostFor func(Instance) string
	// IMDSFromInstanceOnly answers an instance's metadata only to
	// connections from its own private IP, as EC2's link-local IMDS is
	// reachable from the instance alone (others get 403); the harness,
	// whose instances have their own addresses, sets it.
	IMDSFromInstanceOnly bool
	// Models, when set, checks every successful EC2 and SQS response
	// against AWS's API models (awsmodel); ModelViolations lists what broke
	// them. test/stack sets it in every e2e test.
	Models *awsmodel.Set
}

// Call is one recorded API call.
type Call struct {
	Service string // "ec2" or "sqs" (the IAM service prefix)
	Action  string
	Params  url.Values // EC2: the form; SQS: the JSON body's top-level strings
	Code    string     // error code returned, "" on success
	At      time.Time
	Delayed time.Duration // held back by a Fault's Delay
}

// Fault makes calls fail.
type Fault struct {
	Service  string        // "ec2" (default) or "sqs"
	Action   string        // action to fail; "" = any of the service
	Code     string        // error code, e.g. "RequestLimitExceeded"
	Message  string        // default "injected fault"
	Status   int           // HTTP status; default from the code
	Count    int           // fail the next Count matching calls ...
	Fraction float64       // ... or this fraction of matching calls
	For      time.Duration // ... while the fault lasts (emulated; 0 = until removed or Count used)
	// AfterEffect performs the call and then returns the error (a lost
	// response): the client's retry must not duplicate its effect.
	AfterEffect bool
	// Delay holds a matching call this long (wall clock) before it is
	// served: a latency spike. With no Code the call then succeeds.
	Delay time.Duration
}

type fault struct {
	Fault
	until time.Time
	left  int
}

type poolKey struct{ typ, zone, capacity string }

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
	denied    map[string]bool            // EC2 actions answered UnauthorizedOperation (Deny)
	bill      []*BillLine
	crs       []*capReservation          // capacity reservations (reservations.go)
	pgs       map[string]*placementGroup // placement groups by name (efa.go)
	events    []*EventRecord
	rules     []*eventRule
	seq       int
	ipSeq     int
	closed    bool
	rng       *rand.Rand
	wg        sync.WaitGroup
	hooks     sync.WaitGroup

	identity   identity // lazily made signing keys
	violations []awsmodel.Violation
	sqs        sqsService
	fs         faultState // ShortFleets, SetDescribeLag, HoldCalls (faults.go)
}

// New builds a server; call Start to listen.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = DefaultAccount
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
	if opts.StopDelay == 0 {
		opts.StopDelay = opts.ShutdownDelay
	}
	if opts.StartDelay == 0 {
		opts.StartDelay = opts.BootDelay / 2
		if opts.BootDelay < 0 {
			opts.StartDelay = -1
		}
	}
	if opts.TerminatedRetention == 0 {
		opts.TerminatedRetention = time.Hour
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
	s.sqs.init(s)
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

// URL is the API endpoint, e.g. "http://127.0.0.1:41234": EC2 and SQS.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the API and every IMDS listener, ends long polls, and waits
// for hooks that are running. OnStop is not called for instances still
// running: the test that started something in OnStart cleans it up itself.
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
	s.releaseHolds()
	s.sqs.close()
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
	return s.poolFree(instanceType, zone, capacity)
}

func (s *Server) poolFree(typ, zone, lifecycle string) int {
	if n, ok := s.capacity[poolKey{typ, zone, lifecycle}]; ok {
		return n
	}
	return -1
}

func (s *Server) consume(typ, zone, lifecycle string) {
	k := poolKey{typ, zone, lifecycle}
	if n, ok := s.capacity[k]; ok {
		s.capacity[k] = n - 1
	}
}

func (s *Server) giveBack(typ, zone, lifecycle string) {
	k := poolKey{typ, zone, lifecycle}
	if n, ok := s.capacity[k]; ok {
		s.capacity[k] = n + 1
	}
}

// SetLaunchIndexes changes how later fleets number their instances.
func (s *Server) SetLaunchIndexes(m LaunchIndexMode) error {
	if !m.valid() {
		return fmt.Errorf("launch index mode %q: want %s", m, strings.Join(launchIndexModes, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.LaunchIndexes = m
	return nil
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

// spotPrice is the pool's spot price as DescribeSpotPriceHistory publishes
// it (USD/hour, six decimals).
func (s *Server) spotPrice(typ, zone string) float64 {
	if s.opts.SpotPrice != nil {
		return math.Round(s.opts.SpotPrice(typ, zone)*1e6) / 1e6
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
	return math.Round(p*1e6) / 1e6
}

// price is what an instance of a lifecycle costs per hour now.
func (s *Server) price(typ, zone, lifecycle string) float64 {
	if lifecycle == "spot" {
		return s.spotPrice(typ, zone)
	}
	t, _ := s.opts.Catalog.Lookup(typ)
	return t.OnDemandUSD
}
