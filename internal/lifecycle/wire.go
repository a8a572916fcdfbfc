package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/logging"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/userdata"
	"github.com/burst-hpc/burst/sizer/api"
	"github.com/burst-hpc/burst/sizer/auth"
	"github.com/burst-hpc/burst/sizer/client"
	"github.com/burst-hpc/burst/sizer/policy"
)

// Stack is what a burst program run by Slurm needs, built from burst.yaml.
type Stack struct {
	Cfg        *config.Config
	Log        *slog.Logger
	Slurm      *slurm.Scontrol
	Cloud      *ec2p.Provider
	Sizer      *client.Client // nil when the admin token cannot be read
	AdminToken string
	Recorder   *JournalRecorder
	closeLog   func() error
}

// Close flushes and closes the log.
func (s *Stack) Close() {
	if s.closeLog != nil {
		s.closeLog()
	}
}

// Open loads burst.yaml and builds the stack. Configuration problems come
// back as config.Problems (exit status 2).
func Open(ctx context.Context, cfgPath, prog string) (*Stack, error) {
	cfg, err := config.Load(config.ResolvePath(cfgPath))
	if err != nil {
		return nil, err
	}
	log, closeLog := logging.Open(cfg.Log.File, cfg.Log.Level, prog)
	s := &Stack{Cfg: cfg, Log: log, closeLog: closeLog}
	// Slurm gives PrologSlurmctld and EpilogSlurmctld no SLURM_CONF: fall
	// back to slurm.conf in the configured conf_dir
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = filepath.Join(cfg.Slurm.ConfDir, "slurm.conf")
	}
	s.Slurm = slurm.NewScontrol(slurm.ScontrolOptions{BinDir: cfg.Slurm.BinDir, Conf: conf, Logger: log, Timeout: 20 * time.Second})
	api, err := ec2p.NewSDKClient(ctx, cfg.Cluster.Region, cfg.Cluster.EC2Endpoint)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Cloud, err = ec2p.New(api, ec2p.Options{
		Cluster: cfg.Cluster.Name, Subnets: cfg.Network.Subnets, LaunchTemplateName: cfg.Image.LaunchTemplate,
		ImageID: cfg.Image.AMI, InstanceProfile: cfg.Image.InstanceProfile, SecurityGroupIDs: cfg.Network.SecurityGroups,
		StateDir: cfg.Sizer.StateDir, Logger: log,
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("setting up the EC2 provider: %w", err)
	}
	if tok, err := auth.LoadToken(cfg.Sizer.TokenFile); err != nil {
		log.Warn("cannot read the sizer token; ranking in-process and journaling events", "file", cfg.Sizer.TokenFile, "err", err)
	} else {
		s.AdminToken = tok
		s.Sizer, err = client.New(cfg.Sizer.URL, tok, client.WithTimeout(cfg.Sizer.Timeout.Duration))
		if err != nil {
			log.Warn("sizer client", "err", err)
		}
	}
	s.Recorder = &JournalRecorder{Sizer: s.Sizer, Dir: cfg.Sizer.StateDir, Log: log}
	return s, nil
}

// FallbackRanker asks the sizer and, when it does not answer in time, ranks
// in-process with the same policy code. Over-budget and no-offering answers
// from the sizer are final.
type FallbackRanker struct {
	Sizer   *client.Client // may be nil
	Local   *policy.Policy
	Timeout time.Duration
	Log     *slog.Logger
}

// Rank implements Ranker.
func (f *FallbackRanker) Rank(ctx context.Context, rq api.RankRequest) ([]policy.Offering, string, error) {
	log := logOr(f.Log)
	if f.Sizer != nil {
		cctx, cancel := context.WithTimeout(ctx, f.Timeout)
		resp, err := f.Sizer.Rank(cctx, rq)
		cancel()
		switch {
		case err == nil && len(resp.Offerings) > 0:
			return resp.Offerings, "sizer", nil
		case errors.Is(err, client.ErrOverBudget):
			return nil, "sizer", fmt.Errorf("%w: %v", policy.ErrOverBudget, err)
		case errors.Is(err, client.ErrNoOffering):
			return nil, "sizer", err
		}
		log.Warn("sizer did not answer; ranking in-process", "job", rq.Job.JobID, "err", err)
	}
	req, merrs := rq.Job.Policy()
	for _, e := range merrs {
		log.Warn("job metadata", "job", rq.Job.JobID, "problem", e.Error())
	}
	offers, err := f.Local.Rank(policy.RankInput{Class: rq.Class, Request: req, Zones: rq.Zones})
	return offers, "in-process", err
}

// JournalRecorder sends instance events to the sizer and, when it is down,
// appends them to a journal in the state directory (0600) that the next run
// replays first, so no launch or termination is lost for spend accounting.
type JournalRecorder struct {
	Sizer *client.Client // may be nil: journal only
	Dir   string
	Log   *slog.Logger
	mu    sync.Mutex
}

type journalEntry struct {
	Kind  string            `json:"kind"` // launch | terminate
	Event api.InstanceEvent `json:"event"`
}

func (j *JournalRecorder) path() string { return filepath.Join(j.Dir, "instance-events.jsonl") }

// Launched implements Recorder.
func (j *JournalRecorder) Launched(ctx context.Context, ev api.InstanceEvent) error {
	return j.send(ctx, journalEntry{"launch", ev})
}

// Terminated implements Recorder.
func (j *JournalRecorder) Terminated(ctx context.Context, id string, at time.Time) error {
	return j.send(ctx, journalEntry{"terminate", api.InstanceEvent{InstanceID: id, Time: at}})
}

func (j *JournalRecorder) post(ctx context.Context, e journalEntry) error {
	if j.Sizer == nil {
		return client.ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if e.Kind == "launch" {
		return j.Sizer.Launched(ctx, e.Event)
	}
	return j.Sizer.Terminated(ctx, e.Event.InstanceID, e.Event.Time)
}

func (j *JournalRecorder) send(ctx context.Context, e journalEntry) error {
	err := j.post(ctx, e)
	if err == nil {
		return nil
	}
	return j.append(e, err)
}

func (j *JournalRecorder) append(e journalEntry, cause error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		return fmt.Errorf("journaling instance event: %w (sizer: %v)", err, cause)
	}
	f, err := os.OpenFile(j.path(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journaling instance event: %w (sizer: %v)", err, cause)
	}
	defer f.Close()
	b, _ := json.Marshal(e)
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journaling instance event: %w", err)
	}
	logOr(j.Log).Info("sizer unreachable; journaled instance event", "kind", e.Kind, "instance_id", e.Event.InstanceID, "cause", cause)
	return nil
}

// Flush replays the journal to the sizer; entries it cannot send stay.
func (j *JournalRecorder) Flush(ctx context.Context) (sent int, err error) {
	if j.Sizer == nil {
		return 0, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	data, err := os.ReadFile(j.path())
	if errors.Is(err, os.ErrNotExist) || len(data) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the event journal: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var keep []string
	for i, l := range lines {
		var e journalEntry
		if json.Unmarshal([]byte(l), &e) != nil {
			logOr(j.Log).Warn("dropping a corrupt journal line", "line", i+1)
			continue
		}
		if err := j.post(ctx, e); err != nil {
			keep = lines[i:]
			break
		}
		sent++
	}
	tmp := j.path() + ".tmp"
	out := ""
	if len(keep) > 0 {
		out = strings.Join(keep, "\n") + "\n"
	}
	if err := os.WriteFile(tmp, []byte(out), 0o600); err != nil {
		return sent, fmt.Errorf("rewriting the event journal: %w", err)
	}
	return sent, os.Rename(tmp, j.path())
}

// UserDataFor renders the user data of a launch request. Every node of the
// request gets the same document, naming all its nodes with their
// credentials; a node finds its own entry by its burst:node tag (or its
// launch index in burst:nodes), see internal/bootstrap.
func (s *Stack) UserDataFor(nodes []cloud.NodeSpec, issued time.Time) (string, error) {
	return RenderUserData(s.Cfg, s.AdminToken, nodes, issued)
}

// nodeToken is the node's sizer credential; without the admin token (the
// sizer is not set up) the node gets an unusable random one and its agent's
// reports are refused, which the sizer's metrics show.
func nodeToken(admin, node string) string {
	if admin == "" {
		tok, _ := auth.Generate()
		return "unset-" + tok
	}
	return auth.NodeToken(admin, node)
}

// RenderUserData builds the user-data document for nodes.
func RenderUserData(cfg *config.Config, adminToken string, nodes []cloud.NodeSpec, issued time.Time) (string, error) {
	if len(nodes) == 0 {
		return "", errors.New("no nodes")
	}
	u := userdata.UserData{
		NodeName: nodes[0].Node, Cluster: cfg.Cluster.Name, IssuedAt: issued.UTC(),
		Slurm: userdata.Slurm{Controllers: []string{cfg.Slurm.Controller}, Port: cfg.Slurm.ControllerPort},
		Munge: userdata.Munge{KeySource: cfg.Slurm.MungeKeySource, KeyPath: cfg.Slurm.MungeKeyPath, Socket: cfg.Slurm.MungeSocket},
		FSx: userdata.FSx{DNSName: cfg.FSx.DNSName, MountName: cfg.FSx.MountName, MountPoint: cfg.FSx.MountPoint,
			CheckpointRoot: filepath.Join(cfg.FSx.MountPoint, cfg.FSx.CheckpointDir)},
		Agent: userdata.Agent{SizerURL: cfg.Sizer.URL, IMDSEndpoint: cfg.Agent.IMDSEndpoint,
			ReportInterval: userdata.Duration(cfg.Agent.ReportInterval.Duration)},
	}
	if cfg.Slurm.NodeConf == "configless" {
		u.Slurm.ConfMode = userdata.ConfConfigless
	} else {
		u.Slurm.ConfMode, u.Slurm.ConfPath = userdata.ConfFile, cfg.Slurm.NodeConf
	}
	if len(nodes) > 1 {
		// one document for the whole fleet: each instance finds its entry by
		// its burst:nodes tag and launch index
		u.NodeName = ""
		for _, n := range nodes {
			u.Nodes = append(u.Nodes, userdata.NodeEntry{Name: n.Node, Credential: nodeToken(adminToken, n.Node)})
		}
	} else {
		u.Agent.Credential = nodeToken(adminToken, nodes[0].Node)
	}
	if cfg.FSx.LocalDir != "" {
		u.Test = &userdata.Test{LocalFSDir: cfg.FSx.LocalDir}
	}
	b, err := userdata.Encode(u)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
