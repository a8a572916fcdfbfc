package harness

import (
	"context"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
)

// User is an unprivileged local account that jobs run as.
type User struct {
	Name     string
	UID, GID int
}

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
// the root's /etc/passwd and /etc/group (its writable overlay, gone with
// the cluster).
func (c *Cluster) AddUser(ctx context.Context, u User) error {
	if c.slurm.Host() {
		return nil
	}
	script := fmt.Sprintf("grep -q '^%[1]s:' /etc/group || echo '%[1]s:x:%[3]d:' >> /etc/group; "+
		"grep -q '^%[1]s:' /etc/passwd || echo '%[1]s:x:%[2]d:%[3]d::/nonexistent:/bin/bash' >> /etc/passwd", u.Name, u.UID, u.GID)
	if out, err := c.env.Command(ctx, "", "/", "/bin/sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("adding user %s to the Slurm root: %v: %s", u.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
