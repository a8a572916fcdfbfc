package compose

import (
	"context"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Stack is what burst-resume and burst-suspend need, built from burst.yaml:
// the file log, Slurm, the EC2 provider, the sizer client (nil when the
// admin token cannot be read) and the journaling event recorder.
type Stack struct {
	Cfg        *config.Config
	Log        *slog.Logger
	Slurm      slurm.Client
	Cloud      *ec2p.Provider
	Sizer      *sizerclient.Client
	AdminToken string
	Recorder   *lifecycle.JournalRecorder
	closeLog   func() error
}

// Open loads burst.yaml (see Load) and builds the stack of prog.
// Configuration problems come back as config.Problems (exit status 2); a
// failure to start is also recorded in the default log (see StartupError).
func Open(ctx context.Context, cfgFlag, prog string, getenv Getenv) (st *Stack, err error) {
	defer func() {
		if err != nil {
			StartupError(prog, err, getenv)
		}
	}()
	cfg, err := Load(cfgFlag, getenv)
	if err != nil {
		return nil, err
	}
	log, closeLog := FileLogger(cfg, prog)
	s := &Stack{Cfg: cfg, Log: log, closeLog: closeLog}
	if s.Slurm, err = Slurm(cfg, getenv, log); err != nil {
		s.Close()
		return nil, err
	}
	if s.Cloud, err = Cloud(ctx, cfg, log); err != nil {
		s.Close()
		return nil, err
	}
	var serr error
	s.Sizer, s.AdminToken, serr = SizerClient(cfg)
	if serr != nil && s.AdminToken == "" {
		log.Warn("cannot read the sizer token; ranking in-process and journaling events", "file", cfg.Sizer.TokenFile, "err", serr)
	} else if serr != nil {
		log.Warn("sizer client", "err", serr)
	}
	s.Recorder = &lifecycle.JournalRecorder{Sizer: s.Sizer, Dir: cfg.Sizer.StateDir, Log: log}
	return s, nil
}

// Close flushes and closes the log.
func (s *Stack) Close() {
	if s.closeLog != nil {
		s.closeLog()
	}
}

// UserDataFor renders the user data of a launch request (see
// lifecycle.RenderUserData).
func (s *Stack) UserDataFor(nodes []cloud.NodeSpec, issued time.Time) (string, error) {
	return lifecycle.RenderUserData(s.Cfg, nodes, issued)
}

// Breaker is the launch breaker shared by every resume process (its state
// file lives in sizer.state_dir).
func (s *Stack) Breaker() *breaker.Breaker {
	return breaker.New(breaker.Options{Dir: s.Cfg.Sizer.StateDir, Logger: s.Log})
}

// Resumer is burst-resume's Resumer: it ranks through the sizer, falling
// back to the in-process policy of burst.yaml. Only resume builds the
// policy: suspend, prolog and epilog never need it.
func (s *Stack) Resumer() (*lifecycle.Resumer, error) {
	local, err := Policy(s.Cfg)
	if err != nil {
		return nil, err
	}
	return &lifecycle.Resumer{Cfg: s.Cfg, Slurm: s.Slurm, Cloud: s.Cloud, Recorder: s.Recorder, Log: s.Log, UserData: s.UserDataFor,
		Breaker: s.Breaker(), Admit: s.Admission(), Intents: s.Recorder.Intent,
		Ranker: &lifecycle.FallbackRanker{Sizer: s.Sizer, Local: local, Timeout: s.Cfg.Sizer.Timeout.Duration, Log: s.Log}}, nil
}

// Admission is the admission controller (budgets, limits), reading spend
// through the sizer or the local path (see Spend).
func (s *Stack) Admission() *admit.Controller {
	if !SharedAdmissions(s.Cfg) {
		return Admission(s.Cfg, s.Spend, s.Log)
	}
	if s.Sizer == nil {
		return AdmissionOn(s.Cfg, s.Spend, s.Log, unreachableShared{"admissions are shared through the sizer (sizer.store.driver: postgres) and this program has no sizer token (sizer.token_file)"})
	}
	return AdmissionOn(s.Cfg, s.Spend, s.Log, sizerclient.SharedAdmissions{C: s.Sizer})
}

// Hooks is the prolog's and epilog's spend and admission bookkeeping.
func (s *Stack) Hooks() *lifecycle.Hooks {
	return &lifecycle.Hooks{Cfg: s.Cfg, Slurm: s.Slurm, Admit: s.Admission(), Recorder: s.Recorder, Log: s.Log}
}

// Suspender is burst-suspend's Suspender.
func (s *Stack) Suspender() *lifecycle.Suspender {
	return &lifecycle.Suspender{Cfg: s.Cfg, Cloud: s.Cloud, Recorder: s.Recorder, Log: s.Log}
}

// Releaser is the EpilogSlurmctld's Releaser; linger starts the warm-reuse
// timer (the program's own self-exec).
func (s *Stack) Releaser(linger func(nodes []string, until time.Time, waiting []uint32) error) *lifecycle.Releaser {
	return &lifecycle.Releaser{Cfg: s.Cfg, Slurm: s.Slurm, Log: s.Log, Linger: linger}
}
