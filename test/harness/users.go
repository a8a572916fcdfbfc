package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// User is an unprivileged local account that jobs run as.
type User struct {
	Name     string
	UID, GID int
}

// DefaultUser is the ordinary account a cluster's jobs run as unless
// Options.User names another.
const DefaultUser = "burstuser"

var usersMu sync.Mutex

// EnsureUser returns the local user name, creating it (a system account
// without a home or a login shell) when it does not exist. Jobs submitted
// as it run as it on every node: the nodes share this machine's accounts.
// Users are left in place for later runs and concurrent tests.
func EnsureUser(name string) (User, error) {
	usersMu.Lock()
	defer usersMu.Unlock()
	if name == "" || strings.ContainsAny(name, ": /\n") {
		return User{}, fmt.Errorf("harness user %q: not a user name", name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		out, cerr := exec.Command("/usr/sbin/useradd", "--system", "--no-create-home", "--user-group", "--shell", "/bin/bash", name).CombinedOutput()
		if cerr != nil {
			// another test process may have made it meanwhile
			if u, err = user.Lookup(name); err != nil {
				return User{}, fmt.Errorf("creating user %s: %v: %s", name, cerr, strings.TrimSpace(string(out)))
			}
		} else if u, err = user.Lookup(name); err != nil {
			return User{}, fmt.Errorf("looking up user %s after creating it: %w", name, err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return User{}, fmt.Errorf("harness user %s is root", name)
	}
	return User{Name: name, UID: uid, GID: gid}, nil
}

// AddUser makes u known where the cluster's Slurm runs: nothing to do for
// the host's Slurm; a Debian root has accounts of its own, and slurmctld
// 24.11+ refuses to build a job's credential (the job is held with
// "slurm_cred_create failure") for a user it cannot look up, so u goes into
// the root's /etc/passwd, /etc/group and /etc/shadow (its writable
// overlay, gone with the cluster). The shadow entry (no password, as
// useradd --system makes on the host) matters on 26.05: `sbatch
// --export=ALL,VAR=...` implies --get-user-env there (its man page; not on 24.11), slurmd runs `su -
// USER -c env` for the job, and PAM's pam_unix refuses su for an account
// without one ("su: Authentication failure"; the job is requeued and held,
// user_env_retrieval_failed_requeued_held). AddUser then checks su works.
func (c *Cluster) AddUser(ctx context.Context, u User) error {
	if c.slurm.Host() {
		return nil
	}
	script := fmt.Sprintf("grep -q '^%[1]s:' /etc/group || echo '%[1]s:x:%[3]d:' >> /etc/group; "+
		"grep -q '^%[1]s:' /etc/passwd || echo '%[1]s:x:%[2]d:%[3]d::/nonexistent:/bin/bash' >> /etc/passwd; "+
		"grep -q '^%[1]s:' /etc/shadow || echo '%[1]s:*:%[4]d:0:99999:7:::' >> /etc/shadow",
		u.Name, u.UID, u.GID, time.Now().Unix()/86400)
	if out, err := c.env.Command(ctx, "", "/", "/bin/sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("adding user %s to the Slurm root: %v: %s", u.Name, err, strings.TrimSpace(string(out)))
	}
	// what slurmd does for --get-user-env (its output parsed, so only the
	// exit status matters here)
	if out, err := c.env.Command(ctx, "", "/", "/bin/su", "-", u.Name, "-c", "/usr/bin/env").CombinedOutput(); err != nil {
		return fmt.Errorf("user %s in the Slurm root: `su - %s -c env` (slurmd's --get-user-env) fails: %v: %s", u.Name, u.Name, err, tail3(string(out)))
	}
	return nil
}

// User is the ordinary account Sbatch submits as (Options.User).
func (c *Cluster) User() User { return c.user }

// setupUser makes the cluster's user (here and in the Slurm root) and gives
// it work/, where jobs start and write their output (the harness, as
// root, reads and writes there too).
func (c *Cluster) setupUser(ctx context.Context) error {
	name := c.opts.User
	if name == "" {
		name = DefaultUser
	}
	u, err := EnsureUser(name) // never root, the cluster's SlurmUser
	if err != nil {
		return err
	}
	if err := c.AddUser(ctx, u); err != nil {
		return err
	}
	if err := os.Chown(filepath.Join(c.dir, "work"), u.UID, u.GID); err != nil {
		return fmt.Errorf("giving work/ to %s: %w", u.Name, err)
	}
	c.user = u
	return nil
}

// tail3 is the last three lines of out, for error messages.
func tail3(out string) string {
	l := strings.Split(strings.TrimSpace(out), "\n")
	if len(l) > 3 {
		l = l[len(l)-3:]
	}
	return strings.Join(l, " | ")
}
