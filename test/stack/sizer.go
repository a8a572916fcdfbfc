package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/tlspin"
)

// StartSizer starts `burst-sizer serve` and waits until it answers.
func (s *Stack) StartSizer(ctx context.Context) error {
	s.sizerLog = filepath.Join(s.Dir, "sizer.log")
	lf, err := os.OpenFile(s.sizerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	// not bound to ctx: the daemon outlives the start-up; StopSizer ends it
	cmd := s.Cluster.Command(context.Background(), filepath.Join(s.opts.BinDir, "burst-sizer"), "--config", s.CfgPath, "serve")
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting burst-sizer: %w", err)
	}
	s.sizer = cmd
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Cfg.Sizer.Listen, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	tail, _ := os.ReadFile(s.sizerLog)
	return fmt.Errorf("burst-sizer did not listen on %s within 20 s; its log:\n%s", s.Cfg.Sizer.Listen, tail)
}

// SizerStopped says whether the sizer daemon is not running.
func (s *Stack) SizerStopped() bool { return s.sizer == nil }

// StopSizer stops the sizer daemon (SIGTERM, as systemd would).
func (s *Stack) StopSizer() {
	if s.sizer == nil || s.sizer.Process == nil {
		return
	}
	s.sizer.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.sizer.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.sizer.Process.Pid, syscall.SIGKILL)
		<-done
	}
	s.sizer = nil
}

// SizerClient is a client of the stack's sizer with token, pinning the
// sizer's CA.
func (s *Stack) SizerClient(token string) (*sizerclient.Client, error) {
	return sizerclient.New(s.Cfg.Sizer.URL, token, sizerclient.WithCAFile(s.Cfg.Sizer.TLS.CAFile), sizerclient.WithTimeout(20*time.Second),
		sizerclient.WithFallbackURLs(s.Cfg.Sizer.URLs...))
}

// Metrics scrapes the sizer's /metrics over HTTPS with the read-only
// credential.
func (s *Stack) Metrics() (string, error) {
	b, err := s.ReadOnlyGet("/metrics")
	return string(b), err
}

// View decodes one of the sizer's read-only JSON views (/v1/money, ...),
// read with the read-only credential.
func (s *Stack) View(path string, out any) error {
	b, err := s.ReadOnlyGet(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding GET %s: %w", path, err)
	}
	return nil
}

// ReadOnlyGet GETs path from the sizer over HTTPS with the read-only
// credential; an answer other than 200 is an error.
func (s *Stack) ReadOnlyGet(path string) ([]byte, error) {
	hc, err := tlspin.LoadHTTPClient(s.Cfg.Sizer.TLS.CAFile, 10*time.Second)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, s.Cfg.Sizer.URL+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+auth.ReadOnlyToken(s.Token))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return b, err
}
