package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/harness"
)

// Replica is a second `burst-sizer serve` on the stack's PostgreSQL store
// (sizer.store), listening on its own port with its own burst.yaml.
type Replica struct {
	URL  string
	Log  string
	cfg  string
	proc *os.Process
	done chan struct{}
}

// StartReplica starts a second sizer beside the stack's and lists it in
// burst.yaml's sizer.urls (so resume, suspend and the hooks fail over to
// it). The stack's config must use a PostgreSQL store.
func (s *Stack) StartReplica(ctx context.Context) (*Replica, error) {
	if s.Cfg.Sizer.Store.Driver != "postgres" {
		return nil, fmt.Errorf("stack: a sizer replica needs sizer.store.driver postgres")
	}
	host, _, err := net.SplitHostPort(s.Cfg.Sizer.Listen)
	if err != nil {
		return nil, err
	}
	port, err := harness.FreePort(host)
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort(host, strconv.Itoa(port))
	r := &Replica{URL: "https://" + listen, Log: filepath.Join(s.Dir, "sizer-b.log"), cfg: filepath.Join(filepath.Dir(s.CfgPath), "burst-b.yaml"), done: make(chan struct{})}
	if err := s.UpdateConfig(func(c *config.Config) { c.Sizer.URLs = []string{r.URL} }); err != nil {
		return nil, err
	}
	c := *s.Cfg
	c.Sizer.Listen, c.Sizer.URL, c.Sizer.URLs = listen, r.URL, []string{s.Cfg.Sizer.URL}
	b, err := yaml.Marshal(&c)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(r.cfg, b, 0o644); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(r.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := s.Cluster.Command(context.Background(), filepath.Join(s.opts.BinDir, "burst-sizer"), "--config", r.cfg, "serve")
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the second burst-sizer: %w", err)
	}
	r.proc = cmd.Process
	go func() { cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", listen, 200*time.Millisecond); err == nil {
			c.Close()
			return r, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.Stop()
	tail, _ := os.ReadFile(r.Log)
	return nil, fmt.Errorf("the second burst-sizer did not listen on %s within 30 s; its log:\n%s", listen, tail)
}

// Stop ends the replica (SIGTERM, then SIGKILL after 10 s).
func (r *Replica) Stop() {
	r.proc.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-r.proc.Pid, syscall.SIGKILL)
		<-r.done
	}
}

// KillSizer SIGKILLs the stack's sizer (its process group), as a head
// node's crash would, and waits for it to be gone. The stack does not
// restart it (SizerStopped stays false): clients fail over to a replica.
func (s *Stack) KillSizer() {
	if s.sizer == nil || s.sizer.Process == nil {
		return
	}
	syscall.Kill(-s.sizer.Process.Pid, syscall.SIGKILL)
	s.sizer.Process.Wait()
}

// SizerLogPath is the stack's sizer's log.
func (s *Stack) SizerLogPath() string { return s.sizerLog }
