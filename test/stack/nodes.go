package stack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/test/ec2emu"
)

func (s *Stack) onStart(in ec2emu.Instance) {
	// The stack names the node namespace after the instance's node tag (a
	// fleet instance gets it from burst-resume's CreateTags a moment after
	// launch); the node itself learns its name from the sizer.
	node := ec2p.NodeOf(in.Tags)
	for deadline := time.Now().Add(15 * time.Second); node == "" && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if cur, ok := s.Emu.Instance(in.ID); ok {
			node = ec2p.NodeOf(cur.Tags)
		}
	}
	if node == "" {
		s.log.Error("emulated instance has no node tag; leaving it unbooted", "instance", in.ID)
		return
	}
	s.mu.Lock()
	for id, n := range s.nodeOf {
		if n == node {
			// a second instance for a node that already has one (a
			// duplicate launch): it runs, but it is not the node
			s.mu.Unlock()
			s.Events.Add(node, "duplicate instance", in.ID+" (node already booted by "+id+")")
			return
		}
	}
	s.nodeOf[in.ID] = node
	s.mu.Unlock()
	s.Events.Add(node, "instance running", in.ID+" "+in.InstanceType+" "+in.Lifecycle)
	boot := s.opts.Boot
	if boot == nil {
		boot = BootstrapNode
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := boot(ctx, s, in, node); err != nil {
		s.log.Error("booting node", "node", node, "instance", in.ID, "err", err)
	}
}

func (s *Stack) onStop(in ec2emu.Instance) {
	s.mu.Lock()
	node := s.nodeOf[in.ID]
	delete(s.nodeOf, in.ID)
	s.mu.Unlock()
	if node == "" {
		return
	}
	s.Events.Add(node, "instance stopped", in.ID)
	if err := s.Cluster.StopNode(node); err != nil {
		s.log.Warn("stopping node namespace", "node", node, "err", err)
	}
}

// BootstrapNode is the default Options.Boot; tests that boot only some
// instances differently wrap it. It boots an instance the way the node
// image does: the
// instance's user data goes to `burst-agent bootstrap` in direct mode inside
// the node's network namespace.
func BootstrapNode(ctx context.Context, s *Stack, in ec2emu.Instance, node string) error {
	ud := filepath.Join(s.Dir, "userdata", in.ID)
	if err := os.WriteFile(ud, in.UserData, 0o600); err != nil {
		return err
	}
	ip, err := netip.ParseAddr(in.PrivateIP)
	if err != nil {
		return fmt.Errorf("instance %s private IP %q: %w", in.ID, in.PrivateIP, err)
	}
	run := filepath.Join(s.Dir, "run", node)
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	agent := filepath.Join(s.opts.HookBin, "burst-agent")
	// no --node-name: the bootstrap learns the node from the sizer's
	// identity exchange. The dead-man switch's poweroff is the emulator's
	// shutdown control for this instance.
	argv := append([]string{"/usr/bin/env", "BURST_EMU_SHUTDOWN_URL=" + s.offURL + "?id=" + in.ID}, s.opts.NodeEnv...)
	argv = append(argv, agent, "bootstrap", "--exec", "direct", "--user-data-file", ud, "--imds-endpoint", in.IMDSURL, "--run-dir", run)
	_, err = s.Cluster.StartNode(ctx, node, ip, argv...)
	return err
}

// startShutdownControl serves the nodes' poweroff stand-in on the
// controller's bridge address (the emulator's own API listens on loopback,
// out of the nodes' reach): POST /poweroff?id=<instance> powers that
// instance off (ec2emu's Shutdown), and only when it comes from that
// instance's own address. The bootstrap closes the URL to non-root users,
// as a real poweroff needs root.
func (s *Stack) startShutdownControl() error {
	ln, err := net.Listen("tcp", net.JoinHostPort(s.Cluster.ControllerAddr().String(), "0"))
	if err != nil {
		return fmt.Errorf("stack: poweroff control: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /poweroff", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		in, ok := s.Emu.Instance(id)
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if !ok || host != in.PrivateIP {
			http.Error(w, "only an instance powers itself off", http.StatusForbidden)
			return
		}
		if err := s.Emu.Shutdown(id); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		s.Events.Add(s.nodeName(id), "powered itself off", id)
	})
	s.shutdown = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.shutdown.Serve(ln)
	s.offURL = "http://" + ln.Addr().String() + "/poweroff"
	return nil
}

// PoweroffURL is the poweroff stand-in of an instance (what its dead-man
// switch posts).
func (s *Stack) PoweroffURL(id string) string { return s.offURL + "?id=" + id }

func (s *Stack) nodeName(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodeOf[id]
}
