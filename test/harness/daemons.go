package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func (c *Cluster) startMunge(ctx context.Context) error {
	key := filepath.Join(c.dir, "munge/key/munge.key")
	if out, err := c.env.Command(ctx, "", c.dir, c.opts.SbinDir+"/mungekey", "--create", "--keyfile="+key, "--bits=1024").CombinedOutput(); err != nil {
		c.log.Debug("mungekey failed, using random bytes", "err", err, "out", string(out))
		b := make([]byte, 128)
		_, _ = rand.Read(b)
		if err := os.WriteFile(key, b, 0o600); err != nil {
			return fmt.Errorf("writing munge key: %w", err)
		}
	}
	if err := os.Chmod(key, 0o600); err != nil {
		return err
	}
	c.mungeSocket = filepath.Join(c.dir, "munge/run/munge.sock")
	var err error
	c.munged, err = c.startProc("munged", filepath.Join(c.dir, "log", "munged.stdout"), c.Environ(), "",
		c.opts.SbinDir+"/munged", "--foreground", "--key-file="+key, "--socket="+c.mungeSocket,
		"--pid-file="+filepath.Join(c.dir, "munge/run/munged.pid"),
		"--seed-file="+filepath.Join(c.dir, "munge/key/munged.seed"),
		"--log-file="+filepath.Join(c.dir, "munge/key/munged.log"))
	if err != nil {
		return err
	}
	return c.waitFor(ctx, 10*time.Second, "munged socket", c.munged, filepath.Join(c.dir, "munge/key/munged.log"), func() bool {
		fi, err := os.Stat(c.mungeSocket)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	})
}

func (c *Cluster) startRest(ctx context.Context) error {
	c.restSocket = filepath.Join(c.dir, "run", "slurmrestd.sock")
	env := c.Environ()
	auth := "rest_auth/local"
	if c.opts.RestJWT {
		auth = "rest_auth/jwt"
		// without it slurmrestd talks to slurmctld through auth/munge, which
		// rejects every passed-on token ("Rejecting thread config token")
		env = append(env, "SLURM_JWT=daemon")
	}
	argv := []string{c.opts.SbinDir + "/slurmrestd", "-f", c.ConfPath(), "-a", auth, "-s", c.slurm.RestPlugin()}
	if c.slurm.Version == "22.05" {
		// slurmrestd refuses to run as root unless told it is a test
		env = append(env, "SLURMRESTD_SECURITY=disable_user_check")
	} else {
		// 26.05 refuses that too: run it as nobody, as a site would run it
		// as an unprivileged user; rest_auth/local still sees the client
		// (root) through the socket's peer credentials
		rest := filepath.Join(c.dir, "run", "rest")
		if err := os.Mkdir(rest, 0o755); err != nil {
			return err
		}
		if err := os.Chown(rest, 65534, 65534); err != nil { // nobody:nogroup in Debian
			return err
		}
		c.restSocket = filepath.Join(rest, "slurmrestd.sock")
		argv = append([]string{"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"}, argv...)
	}
	argv = append(argv, "unix:"+c.restSocket)
	if c.opts.RestJWT {
		var err error
		if c.restPort, err = FreePort(""); err != nil {
			return err
		}
		argv = append(argv, net.JoinHostPort(c.net.Gateway.String(), fmt.Sprint(c.restPort)))
	}
	var err error
	c.slurmrestd, err = c.startProc("slurmrestd", filepath.Join(c.dir, "log", "slurmrestd.log"), env, "", argv...)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, 10*time.Second, "slurmrestd socket", c.slurmrestd, filepath.Join(c.dir, "log", "slurmrestd.log"), func() bool {
		if _, err := os.Stat(c.restSocket); err != nil {
			return false
		}
		if c.restPort == 0 {
			return true
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.net.Gateway.String(), fmt.Sprint(c.restPort)), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// writeJWTKey writes the HS256 key slurmctld verifies tokens with
// (Options.RestJWT): 32 random bytes, as Slurm's JWT guide makes them.
func (c *Cluster) writeJWTKey() error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(c.JWTKeyPath(), key, 0o600); err != nil {
		return fmt.Errorf("writing the JWT key: %w", err)
	}
	return nil
}

// JWTKeyPath is the HS256 key of auth/jwt (Options.RestJWT), in
// StateSaveLocation, mode 0600, owned by SlurmUser (root).
func (c *Cluster) JWTKeyPath() string { return filepath.Join(c.dir, "state", "jwt_hs256.key") }

// RestURL is slurmrestd's TCP address on the bridge, "http://10.x.y.1:PORT"
// ("" unless Options.RestJWT).
func (c *Cluster) RestURL() string {
	if c.restPort == 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(c.net.Gateway.String(), fmt.Sprint(c.restPort))
}

// waitFor polls cond every 50 ms until true, p exits, limit passes or ctx ends.
func (c *Cluster) waitFor(ctx context.Context, limit time.Duration, what string, p *proc, logPath string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if cond() {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("waiting for %s: %s exited (%v); last log lines of %s:\n%s", what, p.name, p.err, logPath, tail(logPath, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; last log lines of %s:\n%s", what, ctx.Err(), logPath, tail(logPath, 15))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitPing(ctx context.Context) error {
	return c.waitFor(ctx, 30*time.Second, "slurmctld to answer scontrol ping", c.slurmctld, c.SlurmctldLog(), func() bool {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := c.Run(pctx, "scontrol", "ping")
		return err == nil && strings.Contains(out, "is UP")
	})
}
