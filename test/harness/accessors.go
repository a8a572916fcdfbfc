package harness

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ID is the run's random id, part of every name the run makes.
func (c *Cluster) ID() string { return c.id }

// Name is the ClusterName.
func (c *Cluster) Name() string { return c.name }

// Dir is the run dir: etc/ (slurm.conf, fragment.conf, gres.conf), log/,
// state/, spool/, run/, dev/, work/ (cwd of Run), munge/.
func (c *Cluster) Dir() string { return c.dir }

// ConfPath is the generated slurm.conf.
func (c *Cluster) ConfPath() string { return filepath.Join(c.dir, "etc", "slurm.conf") }

// FragmentPath is the Included copy of Options.Fragment.
func (c *Cluster) FragmentPath() string { return filepath.Join(c.dir, "etc", "fragment.conf") }

// GresConfPath is the generated gres.conf.
func (c *Cluster) GresConfPath() string { return filepath.Join(c.dir, "etc", "gres.conf") }

// DevDir holds the fake GPU devices nvidia0..N-1 (for gres.conf File=).
func (c *Cluster) DevDir() string { return filepath.Join(c.dir, "dev") }

// SlurmctldLog is slurmctld's log file.
func (c *Cluster) SlurmctldLog() string { return filepath.Join(c.dir, "log", "slurmctld.log") }

// SlurmdLog is the slurmd log file of node.
func (c *Cluster) SlurmdLog(node string) string {
	return filepath.Join(c.dir, "log", "slurmd-"+node+".log")
}

// MungeSocket is the private munged socket.
func (c *Cluster) MungeSocket() string { return c.mungeSocket }

// RestSocket is slurmrestd's unix socket ("" unless Options.RestAPI).
func (c *Cluster) RestSocket() string { return c.restSocket }

// RestClient returns an HTTP client whose every request goes to slurmrestd's
// socket: client.Get("http://slurm/slurm/" + c.Slurm().RestVersion() + "/jobs").
func (c *Cluster) RestClient() *http.Client {
	sock := c.restSocket
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// Network returns the bridge and subnet of this run.
func (c *Cluster) Network() Network { return c.net }

// ControllerAddr is slurmctld's address (the bridge address).
func (c *Cluster) ControllerAddr() netip.Addr { return c.net.Gateway }

// Ports returns SlurmctldPort and SlurmdPort.
func (c *Cluster) Ports() (slurmctld, slurmd int) { return c.ctldPort, c.slurmdPort }

// Env is what a Slurm client needs to talk to this cluster: SLURM_CONF=...
func (c *Cluster) Env() []string { return []string{"SLURM_CONF=" + c.ConfPath()} }

// Environ is this process's environment without any SLURM_* variable, plus
// Env() and a PATH with the Slurm binaries: the environment of every
// process the harness starts.
func (c *Cluster) Environ() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "SLURM_") || strings.HasPrefix(e, "PATH=") {
			continue
		}
		env = append(env, e)
	}
	return append(env, "PATH="+c.opts.SbinDir+":"+c.opts.BinDir+":/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF="+c.ConfPath())
}
