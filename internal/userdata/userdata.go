// Package userdata defines the versioned EC2 user-data document that
// burst-resume writes into every burst instance and the node bootstrap
// (internal/bootstrap) reads back at boot.
//
// Wire format (version 2): the first line is exactly
//
//	#burst-userdata v2
//
// followed by one JSON object (the UserData struct, snake_case keys). The
// whole document must fit EC2's 16 KB user-data limit (counted before base64).
// cloud-init ignores a part it does not recognise ("#burst-userdata" is not a
// cloud-init type), so the image may keep cloud-init enabled.
//
// Every value is validated against a narrow character set so that nothing a
// caller puts in user data can change the meaning of a command line, an
// environment file or a systemd unit: the bootstrap passes values as separate
// argv elements (never through a shell), and the character sets make that
// true even for the env files systemd reads.
package userdata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Version is the user-data format version this package writes and reads.
const Version = 2

// headerPrefix starts the first line of every burst user-data document.
const headerPrefix = "#burst-userdata v"

// Header is the first line (without newline) of a version-1 document.
var Header = headerPrefix + strconv.Itoa(Version)

// MaxSize is EC2's user-data limit in bytes (raw, before base64).
const MaxSize = 16 * 1024

// Slurm configuration sources.
const (
	// ConfConfigless fetches slurm.conf from slurmctld (`slurmd --conf-server`);
	// needs SlurmctldParameters=enable_configless on the controller. Production default.
	ConfConfigless = "configless"
	// ConfFile reads slurm.conf from a path on the node (a shared file system or
	// a file baked into the image); `slurmd -f <path>`.
	ConfFile = "file"
)

// Defaults applied by Decode (and by Encode before validating) to optional fields.
const (
	DefaultSlurmctldPort  = 6817
	DefaultMungeKeyPath   = "/etc/munge/munge.key"
	DefaultMungeSocket    = "/run/munge/munge.socket.2"
	DefaultReportInterval = 15 * time.Second
)

// UserData is everything a burst node needs to join the cluster.
type UserData struct {
	// NodeName is the Slurm node name burst-resume launched the instance
	// for, when the document is for one node; empty for a multi-node fleet
	// (EC2 Fleet gives every instance the same user data). Either way the
	// node learns its name from the sizer's identity exchange, which takes
	// it from the instance's burst:node tag; when set here the two must
	// agree.
	NodeName string `json:"node_name,omitempty"`
	// Cluster is the Slurm ClusterName; recorded in logs and agent reports.
	Cluster string `json:"cluster"`
	// IssuedAt is when burst-resume launched the instance. The bootstrap starts
	// slurmd no earlier than IssuedAt + 2 s: a slurmd that registers in the same
	// wall-clock second as the power-up request is ignored by slurmctld 22.05
	// ("Still waiting for boot of node") until ResumeTimeout.
	IssuedAt time.Time `json:"issued_at"`
	Slurm    Slurm     `json:"slurm"`
	Munge    Munge     `json:"munge"`
	FSx      FSx       `json:"fsx"`
	Agent    Agent     `json:"agent"`
	// Test is set only by the end-to-end tests; nil in production.
	Test *Test `json:"test,omitempty"`
}

// Slurm says how slurmd finds its controller and configuration.
type Slurm struct {
	// Controllers are slurmctld host names or IPv4 addresses, primary first.
	Controllers []string `json:"controllers"`
	// Port is SlurmctldPort (default 6817).
	Port int `json:"port,omitempty"`
	// ConfMode is ConfConfigless (default) or ConfFile.
	ConfMode string `json:"conf_mode,omitempty"`
	// ConfPath is the slurm.conf path on the node; required with ConfFile, forbidden otherwise.
	ConfPath string `json:"conf_path,omitempty"`
}

// Munge says where the cluster's munge key comes from.
type Munge struct {
	// KeySource is an AWS Secrets Manager secret ARN
	// (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME; SecretBinary holds the
	// raw key, or SecretString holds it base64-encoded) or, for tests and
	// images with a baked key, file:///absolute/path. Never the key itself:
	// user data is readable by anyone who can describe the instance.
	KeySource string `json:"key_source"`
	// KeyPath is where the key is installed (default /etc/munge/munge.key).
	KeyPath string `json:"key_path,omitempty"`
	// Socket is munged's socket (default /run/munge/munge.socket.2). Only
	// conf_mode "file" may move it: a configless slurmd fetches slurm.conf
	// through the default socket.
	Socket string `json:"socket,omitempty"`
}

// FSx describes the shared FSx for Lustre file system.
type FSx struct {
	// DNSName is the file system's DNS name (fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com).
	DNSName string `json:"dns_name"`
	// MountName is the file system's mount name (DescribeFileSystems LustreConfiguration.MountName).
	MountName string `json:"mount_name"`
	// MountPoint is the local directory it is mounted on (e.g. /fsx).
	MountPoint string `json:"mount_point"`
	// CheckpointRoot is created at boot; jobs and the agent make per-job
	// directories below it. It must be inside MountPoint.
	CheckpointRoot string `json:"checkpoint_root"`
}

// Agent holds burst-agent's settings.
type Agent struct {
	// SizerURL is burst-sizer's base URL: https only.
	SizerURL string `json:"sizer_url"`
	// SizerURLs are more sizers on the same PostgreSQL (sizer.urls), tried
	// in turn when SizerURL does not answer.
	SizerURLs []string `json:"sizer_urls,omitempty"`
	// SizerCA is the PEM certificate of the CA the sizer's certificate
	// chains to (`burst-sizer tls init`); the bootstrap and the agent trust
	// nothing else. Public: a CA certificate, never a key.
	SizerCA string `json:"sizer_ca"`
	// IMDSEndpoint overrides the instance metadata endpoint (tests only; empty in production).
	IMDSEndpoint string `json:"imds_endpoint,omitempty"`
	// ReportInterval is how often the agent reports GPU utilisation (default 15s).
	ReportInterval Duration `json:"report_interval,omitempty"`
	// LogLevel is the agent's log level (burst.yaml's log.level): debug,
	// info, warn or error; empty means info.
	LogLevel string `json:"log_level,omitempty"`
	// GPUSource is "nvml" (empty: the default) or "sim": simulated GPUs,
	// for the demo and the tests (burst.yaml agent.gpu_source).
	GPUSource string `json:"gpu_source,omitempty"`
	// SimMemoryPercent fixes the memory simulated GPUs show a job using
	// (agent.sim_memory_percent; 0: it follows their utilisation).
	SimMemoryPercent int `json:"sim_memory_percent,omitempty"`
	// GPUHealth configures the GPU health monitor (burst.yaml gpu_health).
	GPUHealth *GPUHealth `json:"gpu_health,omitempty"`
}

// GPUHealth is burst.yaml's gpu_health, as the agent gets it.
type GPUHealth struct {
	Off           bool              `json:"off,omitempty"`
	Interval      Duration          `json:"interval,omitempty"`
	SlowdownAfter Duration          `json:"slowdown_after,omitempty"`
	NVLinkErrors  uint64            `json:"nvlink_errors,omitempty"`
	Xid           map[string]string `json:"xid,omitempty"`
	Events        map[string]string `json:"events,omitempty"`
	// DCGMLevel runs `dcgmi diag -r <level>` in the boot gate (0: not run).
	DCGMLevel   int      `json:"dcgm_level,omitempty"`
	DCGMTimeout Duration `json:"dcgm_timeout,omitempty"`
}

// Test holds the switches the end-to-end tests use. Nothing here is set in production.
type Test struct {
	// LocalFSDir, when set, replaces the FSx for Lustre mount: the bootstrap
	// bind-mounts this existing local directory on FSx.MountPoint instead of
	// running `mount -t lustre`. Several test "instances" given the same
	// directory share files the way FSx-mounted nodes do.
	LocalFSDir string `json:"local_fs_dir,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("15s") in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string such as "15s" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"15s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"15s\": %w", err)
	}
	*d = Duration(v)
	return nil
}

// ValidationError lists every problem found in a document, each prefixed with
// its JSON path.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid burst user data: " + strings.Join(e.Problems, "; ")
}

// ErrNotBurstUserData means the document does not start with the burst header.
var ErrNotBurstUserData = errors.New("not burst user data")

// UnsupportedVersionError is returned for a well-formed header with a version
// this build does not understand.
type UnsupportedVersionError struct {
	Version int
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("unsupported burst user-data version %d (this build reads version %d): "+
		"build the node image from the same burst release as burst-resume", e.Version, Version)
}

// Encode validates u (after applying defaults) and renders the document.
func Encode(u UserData) ([]byte, error) {
	u.ApplyDefaults()
	if err := u.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("encoding user data: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(Header)
	b.WriteByte('\n')
	b.Write(body)
	b.WriteByte('\n')
	if b.Len() > MaxSize {
		return nil, fmt.Errorf("encoding user data: %d bytes exceeds EC2's %d-byte limit; shorten the controller list or paths", b.Len(), MaxSize)
	}
	return b.Bytes(), nil
}

// Decode parses and validates a document. Unknown JSON fields, a missing or
// different header, trailing data and every invalid or missing field are
// errors; all field problems are reported together in a *ValidationError.
func Decode(data []byte) (UserData, error) {
	var u UserData
	if len(data) > MaxSize {
		return u, fmt.Errorf("decoding user data: %d bytes exceeds EC2's %d-byte limit", len(data), MaxSize)
	}
	line, rest, _ := bytes.Cut(data, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if !bytes.HasPrefix(line, []byte(headerPrefix)) {
		first := string(line)
		if len(first) > 40 {
			first = first[:40] + "..."
		}
		return u, fmt.Errorf("decoding user data: %w: first line is %q, want %q", ErrNotBurstUserData, first, Header)
	}
	v, err := strconv.Atoi(string(line[len(headerPrefix):]))
	if err != nil || v < 1 {
		return u, fmt.Errorf("decoding user data: %w: malformed header %q, want %q", ErrNotBurstUserData, line, Header)
	}
	if v != Version {
		return u, fmt.Errorf("decoding user data: %w", &UnsupportedVersionError{Version: v})
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return UserData{}, fmt.Errorf("decoding user data JSON after the header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return UserData{}, errors.New("decoding user data: trailing data after the JSON object")
	}
	u.ApplyDefaults()
	if err := u.Validate(); err != nil {
		return UserData{}, err
	}
	return u, nil
}

// ApplyDefaults fills optional fields left empty.
func (u *UserData) ApplyDefaults() {
	if u.Slurm.Port == 0 {
		u.Slurm.Port = DefaultSlurmctldPort
	}
	if u.Slurm.ConfMode == "" {
		u.Slurm.ConfMode = ConfConfigless
	}
	if u.Munge.KeyPath == "" {
		u.Munge.KeyPath = DefaultMungeKeyPath
	}
	if u.Munge.Socket == "" {
		u.Munge.Socket = DefaultMungeSocket
	}
	if u.Agent.ReportInterval == 0 {
		u.Agent.ReportInterval = Duration(DefaultReportInterval)
	}
}

// ForNode returns the document for the node the identity exchange named:
// an error when the document was written for another node.
func (u UserData) ForNode(node string) (UserData, error) {
	if node == "" {
		return UserData{}, errors.New("no node name: it comes from the sizer's identity exchange")
	}
	if u.NodeName != "" && u.NodeName != node {
		return UserData{}, fmt.Errorf("user data was written for node %q, but the sizer says this instance is node %q", u.NodeName, node)
	}
	u.NodeName = node
	return u, nil
}

// ConfServer returns the value for `slurmd --conf-server`: every controller
// as host:port, comma-separated.
func (s Slurm) ConfServer() string {
	parts := make([]string, len(s.Controllers))
	for i, c := range s.Controllers {
		parts[i] = net.JoinHostPort(c, strconv.Itoa(s.Port))
	}
	return strings.Join(parts, ",")
}

// SecretARN returns the Secrets Manager ARN and its region when KeySource is an ARN.
func (m Munge) SecretARN() (arn, region string, ok bool) {
	sm := secretARNRE.FindStringSubmatch(m.KeySource)
	if sm == nil {
		return "", "", false
	}
	return m.KeySource, sm[2], true
}

// KeyFile returns the path when KeySource is file:///path.
func (m Munge) KeyFile() (string, bool) {
	if !strings.HasPrefix(m.KeySource, "file://") {
		return "", false
	}
	return strings.TrimPrefix(m.KeySource, "file://"), true
}
