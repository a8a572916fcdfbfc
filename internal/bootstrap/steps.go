package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/internal/userdata"
)

// ---------------------------------------------------------------- user data

func (b *boot) readUserData(ctx context.Context) (string, error) {
	var data []byte
	var err error
	if b.o.UserDataFile != "" {
		data, err = os.ReadFile(b.o.UserDataFile)
		if err != nil {
			return "", fmt.Errorf("reading user data file: %w", err)
		}
	} else {
		data, err = fetchIMDSUserData(ctx, b.o.IMDSEndpoint)
		if err != nil {
			return "", err
		}
	}
	ud, err := userdata.Decode(data)
	if err != nil {
		return "", err
	}
	// Which node is this instance? Options.NodeName, else the document's
	// node_name, else (a fleet document) the instance's tags.
	node := b.o.NodeName
	if node == "" && ud.NodeName == "" {
		if node, err = nodeFromIMDS(ctx, b.o.IMDSEndpoint); err != nil {
			return "", fmt.Errorf("finding this instance's node name: %w", err)
		}
		b.log.Info("node name from instance tags", "node", node)
	}
	if ud, err = ud.ForNode(node); err != nil {
		return "", err
	}
	if ud.Test != nil && b.o.Exec == ExecSystemd {
		return "", fmt.Errorf("user data has a test section (test.local_fs_dir %q), which only the test harness's direct mode accepts: "+
			"remove the test settings from burst.yaml", ud.Test.LocalFSDir)
	}
	b.ud, b.haveUD = ud, true
	if ud.Slurm.ConfMode == userdata.ConfFile {
		b.slurmConf = ud.Slurm.ConfPath
	}
	b.log.Info("user data read", "node", ud.NodeName, "cluster", ud.Cluster, "controllers", ud.Slurm.Controllers,
		"conf_mode", ud.Slurm.ConfMode, "fsx", ud.FSx.DNSName, "mount_point", ud.FSx.MountPoint,
		"test_local_fs", ud.Test != nil, "issued_at", ud.IssuedAt)
	return "", nil
}

// fetchIMDSUserData reads /latest/user-data with IMDSv2 (no v1 fallback),
// retrying for about 20 s: at the very start of boot the metadata service can
// be briefly unreachable.
func fetchIMDSUserData(ctx context.Context, endpoint string) ([]byte, error) {
	client := imds.New(imds.Options{Endpoint: endpoint, Timeout: 5 * time.Second, Retry: true})
	var last error
	for attempt := 1; attempt <= 10; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		data, ok, err := client.UserData(actx, userdata.MaxSize)
		cancel()
		if err == nil && ok {
			return data, nil
		}
		if err == nil {
			return nil, errors.New("reading user data from IMDS: the instance has no user data (404); it must be launched by burst-resume")
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading user data from IMDS: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
	return nil, fmt.Errorf("reading user data from IMDS after 10 attempts: %w", last)
}

// -------------------------------------------------------------------- munge

// minMungeKey is munged's minimum key length in bytes.
const minMungeKey = 32

func (b *boot) munge(ctx context.Context) (string, error) {
	m := b.ud.Munge
	if b.o.Exec == ExecDirect && socketLive(m.Socket) {
		b.mungeUp = true
		return "munged already answers on " + m.Socket, nil
	}
	key, err := b.fetchKey(ctx)
	if err != nil {
		return "", err
	}
	if len(key) < minMungeKey {
		return "", fmt.Errorf("munge key from %s is %d bytes; munged needs at least %d (create one with mungekey --create)", m.KeySource, len(key), minMungeKey)
	}
	uid, gid := -1, -1
	if b.o.Exec == ExecSystemd {
		// munged runs as user munge and refuses a key it does not own.
		if u, err := user.Lookup("munge"); err == nil {
			uid, _ = strconv.Atoi(u.Uid)
			gid, _ = strconv.Atoi(u.Gid)
		}
	}
	if err := installSecretFile(m.KeyPath, key, uid, gid); err != nil {
		return "", fmt.Errorf("installing munge key: %w", err)
	}
	b.log.Info("munge key installed", "path", m.KeyPath, "bytes", len(key))
	switch b.o.Exec {
	case ExecSystemd:
		// restart, not start: a munged started with another key must pick this one up.
		if err := b.runCmd(ctx, b.o.Commands.Systemctl, "restart", b.o.Units.Munge); err != nil {
			return "", err
		}
	case ExecDirect:
		if err := os.MkdirAll(filepath.Dir(m.Socket), 0o755); err != nil {
			return "", fmt.Errorf("creating munge socket dir: %w", err)
		}
		if err := os.Chmod(filepath.Dir(m.Socket), 0o755); err != nil { // munged: socket dir needs o+x
			return "", fmt.Errorf("making munge socket dir searchable: %w", err)
		}
		argv := []string{b.o.Commands.Munged, "--foreground", "--key-file=" + m.KeyPath, "--socket=" + m.Socket,
			"--pid-file=" + filepath.Join(b.o.RunDir, "munged.pid"), "--seed-file=" + filepath.Join(b.o.RunDir, "munged.seed"),
			"--log-file=" + filepath.Join(b.o.RunDir, "munged.log")}
		if _, err := b.startDaemon(ctx, "munged", argv, os.Environ(), 0); err != nil {
			return "", err
		}
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { return socketLive(m.Socket) }); err != nil {
		return "", fmt.Errorf("munged did not answer on %s within 10 s: check %s", m.Socket, b.daemonLogHint("munged"))
	}
	b.mungeUp = true
	return "", nil
}

func (b *boot) fetchKey(ctx context.Context) ([]byte, error) {
	m := b.ud.Munge
	if p, ok := m.KeyFile(); ok {
		key, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading munge key: %w", err)
		}
		return key, nil
	}
	arn, region, ok := m.SecretARN()
	if !ok {
		return nil, fmt.Errorf("munge.key_source %q is neither file:// nor a Secrets Manager ARN", m.KeySource)
	}
	creds := b.o.Credentials
	if creds == nil {
		creds = instanceRoleCredentials(b.o.IMDSEndpoint)
	}
	return getSecretValue(ctx, secretsClient{endpoint: b.o.SecretsManagerEndpoint, region: region, creds: creds}, arn)
}

// installSecretFile writes data to path with mode 0400 owned by uid:gid (-1 keeps the current owner).
func installSecretFile(path string, data []byte, uid, gid int) error {
	// Parents stay searchable (munged checks every directory above its socket);
	// a directory created here for the file itself is private.
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(path)), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Dir(path), 0o700); err == nil && uid >= 0 {
		if err := os.Chown(filepath.Dir(path), uid, gid); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o400); err != nil {
		tmp.Close()
		return err
	}
	if uid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return err
		}
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func socketLive(path string) bool {
	c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// -------------------------------------------------------------------- mount

// LustreMountArgs returns the mount(8) arguments AWS documents for FSx for
// Lustre: mount -t lustre -o relatime,flock <dns>@tcp:/<mountname> <mountpoint>.
func LustreMountArgs(f userdata.FSx) []string {
	return []string{"-t", "lustre", "-o", "relatime,flock", f.DNSName + "@tcp:/" + f.MountName, f.MountPoint}
}

func (b *boot) mount(ctx context.Context) (string, error) {
	f := b.ud.FSx
	if err := os.MkdirAll(f.MountPoint, 0o755); err != nil {
		return "", fmt.Errorf("creating mount point: %w", err)
	}
	if ok, err := isMountPoint(f.MountPoint); err != nil {
		return "", err
	} else if ok {
		return f.MountPoint + " is already a mount point", nil
	}
	if b.ud.Test != nil && b.ud.Test.LocalFSDir != "" {
		dir := b.ud.Test.LocalFSDir
		st, err := os.Stat(dir)
		if err != nil {
			return "", fmt.Errorf("test switch test.local_fs_dir: %w", err)
		}
		if !st.IsDir() {
			return "", fmt.Errorf("test switch test.local_fs_dir: %s is not a directory", dir)
		}
		b.log.Warn("TEST SWITCH: bind-mounting a local directory instead of FSx for Lustre", "local_fs_dir", dir, "mount_point", f.MountPoint)
		if err := b.runCmd(ctx, b.o.Commands.Mount, "--bind", dir, f.MountPoint); err != nil {
			return "", err
		}
	} else {
		args := LustreMountArgs(f)
		var err error
		for attempt := 1; attempt <= b.o.MountAttempts; attempt++ {
			if err = b.runCmd(ctx, b.o.Commands.Mount, args...); err == nil {
				break
			}
			b.log.Warn("lustre mount failed", "attempt", attempt, "of", b.o.MountAttempts, "err", err)
			if attempt < b.o.MountAttempts {
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(3 * time.Second):
				}
			}
		}
		if err != nil {
			return "", fmt.Errorf("mounting FSx for Lustre %s@tcp:/%s on %s (check the security group allows TCP 988 and the lustre client module matches the kernel): %w",
				f.DNSName, f.MountName, f.MountPoint, err)
		}
	}
	if ok, err := isMountPoint(f.MountPoint); err != nil {
		return "", err
	} else if !ok {
		return "", fmt.Errorf("mount reported success but %s is not a mount point", f.MountPoint)
	}
	return "", nil
}

func isMountPoint(dir string) (bool, error) {
	fh, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("reading mount table: %w", err)
	}
	defer fh.Close()
	mps, err := ParseMountPoints(fh)
	if err != nil {
		return false, err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	for _, mp := range mps {
		if mp == real || mp == dir {
			return true, nil
		}
	}
	return false, nil
}

// ParseMountPoints returns the mount points (field 5) of a
// /proc/self/mountinfo table, with octal escapes such as \040 decoded.
func ParseMountPoints(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 10 {
			return nil, fmt.Errorf("parsing mountinfo line %d: %d fields, want at least 10", n, len(f))
		}
		mp, err := unescapeOctal(f[4])
		if err != nil {
			return nil, fmt.Errorf("parsing mountinfo line %d: %w", n, err)
		}
		out = append(out, mp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+4 > len(s) {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
			if err != nil {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// -------------------------------------------------------------- checkpoints

func (b *boot) checkpointRoot(context.Context) (string, error) {
	root := b.ud.FSx.CheckpointRoot
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("creating checkpoint root: %w", err)
	}
	// Sticky and world-writable like /tmp: jobs create their own per-job
	// directories and cannot remove each other's.
	if err := os.Chmod(root, os.ModeSticky|0o777); err != nil {
		return "", fmt.Errorf("setting mode 1777 on checkpoint root: %w", err)
	}
	probe, err := os.CreateTemp(root, ".burst-probe-*")
	if err != nil {
		return "", fmt.Errorf("checkpoint root %s is not writable: %w", root, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	// the TaskProlog (burst-agent) gives jobs BURST_CHECKPOINT_DIR under it
	if err := statefile.WriteAtomic(filepath.Join(b.o.RunDir, "checkpoint-root"), []byte(root+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("recording the checkpoint root: %w", err)
	}
	return "", nil
}

// ------------------------------------------------------------------- slurmd

// SlurmdArgs returns slurmd's arguments (without the program and without -D):
// -b reports the boot to slurmctld now (needed for cloud nodes), -N sets the
// node name, and the configuration comes from --conf-server (configless) or -f.
func SlurmdArgs(u userdata.UserData) []string {
	args := []string{"-b", "-N", u.NodeName}
	if u.Slurm.ConfMode == userdata.ConfFile {
		return append(args, "-f", u.Slurm.ConfPath)
	}
	return append(args, "--conf-server", u.Slurm.ConfServer())
}

func (b *boot) slurmd(ctx context.Context) (string, error) {
	if b.o.BootGuard > 0 {
		if wait := time.Until(b.ud.IssuedAt.Add(b.o.BootGuard)); wait > 0 {
			b.log.Info("waiting before slurmd start (slurmctld ignores a boot in the second of the power-up request)", "wait_ms", ms(wait))
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(wait):
			}
			b.waited = wait
		}
	}
	args := SlurmdArgs(b.ud)
	switch b.o.Exec {
	case ExecSystemd:
		line, err := envLine("SLURMD_OPTIONS", strings.Join(args, " "))
		if err != nil {
			return "", err
		}
		if err := statefile.WriteAtomic(filepath.Join(b.o.RunDir, "slurmd.env"), []byte(line), 0o644); err != nil {
			return "", fmt.Errorf("writing slurmd.env: %w", err)
		}
		return "", b.startUnit(ctx, b.o.Units.Slurmd, b.o.RegisterTimeout < 0)
	default:
		// The registration wait watches slurmd; StartCheck only without it.
		check := b.o.StartCheck
		if b.o.RegisterTimeout >= 0 {
			check = 0
		}
		argv := append([]string{b.o.Commands.Slurmd, "-D"}, args...)
		done, err := b.startDaemon(ctx, "slurmd", argv, os.Environ(), check)
		b.slurmdDone = done
		return "", err
	}
}

// ------------------------------------------------------------- registration

// NodeRegistered interprets the State= of `scontrol show node -o`: done when
// slurmctld has heard from slurmd after the power-up, failed when the node
// went DOWN, DRAIN or INVAL (e.g. its GRES or memory do not match slurm.conf).
func NodeRegistered(state string) (done bool, failed bool) {
	flags := strings.Split(state, "+")
	for _, f := range flags {
		switch f {
		case "DOWN", "INVAL", "DRAIN", "FAIL":
			return false, true
		}
	}
	for _, f := range flags {
		switch f {
		case "NOT_RESPONDING", "POWERING_UP", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "UNKNOWN", "FUTURE":
			return false, false
		}
	}
	return state != "", false
}

func (b *boot) register(ctx context.Context) (string, error) {
	if b.o.RegisterTimeout < 0 {
		return "RegisterTimeout < 0: not waiting for registration", nil
	}
	conf, err := b.clientConf()
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(b.o.RegisterTimeout)
	var state, reason, lastErr string
	lastUnit := time.Now()
	for {
		if b.slurmdDone != nil {
			select {
			case err := <-b.slurmdDone:
				return "", fmt.Errorf("slurmd exited before registering (%v): %s", err, b.slurmdLogTail())
			default:
			}
		} else if b.o.Exec == ExecSystemd && time.Since(lastUnit) > 2*time.Second {
			lastUnit = time.Now()
			if err := b.runCmd(ctx, b.o.Commands.Systemctl, "is-active", "--quiet", b.o.Units.Slurmd); err != nil {
				return "", fmt.Errorf("%s stopped before registering (journalctl -u %s): %w", b.o.Units.Slurmd, b.o.Units.Slurmd, err)
			}
		}
		out, err := b.scontrolOut(ctx, conf, "show", "node", "-o", b.ud.NodeName)
		if err != nil {
			lastErr = err.Error()
		} else {
			state, reason = nodeField(out, "State"), nodeField(out, "Reason")
			done, failed := NodeRegistered(state)
			if done {
				b.log.Info("slurmctld sees the node", "state", state)
				return "", nil
			}
			if failed {
				return "", fmt.Errorf("slurmctld set the node %s (reason: %s); slurmd: %s", state, reason, b.slurmdLogTail())
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("node not registered with slurmctld within %s (state %q, last scontrol error %q); slurmd: %s",
				b.o.RegisterTimeout, state, lastErr, b.slurmdLogTail())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (b *boot) slurmdLogTail() string {
	if b.o.Exec == ExecSystemd {
		return "see journalctl -u " + b.o.Units.Slurmd
	}
	return tailFile(filepath.Join(b.o.RunDir, "slurmd.log"), 3)
}

// nodeField returns KEY's value from one `scontrol show node -o` line;
// Reason (which can hold spaces) runs to the next " Key=" it recognises.
func nodeField(line, key string) string {
	i := strings.Index(" "+line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+1:]
	if key == "Reason" {
		if j := strings.Index(v, " ["); j >= 0 { // "Reason=x [root@2026-...]"
			v = v[:j]
		}
		return strings.TrimSpace(v)
	}
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	return v
}

// -------------------------------------------------------------------- agent

// Environment variables burst-agent run reads its per-node settings from.
const (
	EnvNodeName       = "BURST_NODE_NAME"
	EnvSizerURL       = "BURST_SIZER_URL"
	EnvCredentialFile = "BURST_CREDENTIAL_FILE"
	EnvIMDSEndpoint   = "BURST_IMDS_ENDPOINT"
	EnvReportInterval = "BURST_REPORT_INTERVAL"
	EnvCheckpointRoot = "BURST_CHECKPOINT_ROOT"
	EnvLogLevel       = "BURST_LOG_LEVEL"
)

// AgentEnv returns the environment (KEY=value) burst-agent run gets. The
// credential is passed as a file path, never as a value, so it does not show
// in /proc/<pid>/environ of other tools or in `systemctl show`.
func AgentEnv(u userdata.UserData, credentialFile string) []string {
	env := []string{
		EnvNodeName + "=" + u.NodeName,
		EnvSizerURL + "=" + u.Agent.SizerURL,
		EnvCredentialFile + "=" + credentialFile,
		EnvReportInterval + "=" + time.Duration(u.Agent.ReportInterval).String(),
		EnvCheckpointRoot + "=" + u.FSx.CheckpointRoot,
	}
	if u.Agent.IMDSEndpoint != "" {
		env = append(env, EnvIMDSEndpoint+"="+u.Agent.IMDSEndpoint)
	}
	if u.Agent.LogLevel != "" {
		env = append(env, EnvLogLevel+"="+u.Agent.LogLevel)
	}
	return env
}

func (b *boot) agent(ctx context.Context) (string, error) {
	cred := filepath.Join(b.o.RunDir, "agent.credential")
	if err := installSecretFile(cred, []byte(b.ud.Agent.Credential), -1, -1); err != nil {
		return "", fmt.Errorf("writing agent credential: %w", err)
	}
	u := b.ud
	if b.o.IMDSEndpoint != "" {
		// per instance (a fleet shares one user-data document): the agent uses
		// the metadata service the bootstrap was pointed at
		u.Agent.IMDSEndpoint = b.o.IMDSEndpoint
	}
	env := AgentEnv(u, cred)
	switch b.o.Exec {
	case ExecSystemd:
		var buf bytes.Buffer
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			line, err := envLine(k, v)
			if err != nil {
				return "", err
			}
			buf.WriteString(line)
		}
		if err := statefile.WriteAtomic(filepath.Join(b.o.RunDir, "agent.env"), buf.Bytes(), 0o644); err != nil {
			return "", fmt.Errorf("writing agent.env: %w", err)
		}
		return "", b.startUnit(ctx, b.o.Units.Agent, true)
	default:
		argv := []string{b.o.Commands.Agent, "run"}
		// several direct-mode "instances" share one file system: each agent
		// keeps its report buffer under its own run directory
		env = append(env, "BURST_STATE_DIR="+filepath.Join(b.o.RunDir, "agent-state"))
		if u.Slurm.ConfMode == userdata.ConfFile {
			env = append(env, "SLURM_CONF="+u.Slurm.ConfPath)
		}
		_, err := b.startDaemon(ctx, "agent", argv, append(os.Environ(), env...), b.o.StartCheck)
		return "", err
	}
}

// envLine renders one systemd EnvironmentFile line, double-quoted.
func envLine(k, v string) (string, error) {
	if strings.ContainsAny(v, "\x00\n\r") || strings.ContainsAny(k, "\x00\n\r= ") || k == "" {
		return "", fmt.Errorf("writing env file: %s has a character an env file cannot carry", k)
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return k + `="` + r.Replace(v) + "\"\n", nil
}

// ---------------------------------------------------------------- helpers

func (b *boot) startUnit(ctx context.Context, unit string, check bool) error {
	if err := b.runCmd(ctx, b.o.Commands.Systemctl, "start", unit); err != nil {
		return err
	}
	if !check {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.StartCheck):
	}
	if err := b.runCmd(ctx, b.o.Commands.Systemctl, "is-active", "--quiet", unit); err != nil {
		return fmt.Errorf("%s stopped within %s of starting (see journalctl -u %s): %w", unit, b.o.StartCheck, unit, err)
	}
	return nil
}

// runCmd runs a program to completion (no shell) and folds its output into the error.
func (b *boot) runCmd(ctx context.Context, prog string, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	cmd := exec.CommandContext(cctx, prog, args...)
	out, err := cmd.CombinedOutput()
	b.log.Debug("ran command", "argv", append([]string{prog}, args...), "duration_ms", ms(time.Since(t0)), "err", err)
	if err != nil {
		return fmt.Errorf("running %s %s: %w: %s", prog, strings.Join(args, " "), err, lastLines(out, 3))
	}
	return nil
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, " | ")
	if s == "" {
		return "(no output)"
	}
	return s
}

func waitFor(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Unmount detaches the file system mounted on mountPoint (FSx, or the test
// switch's bind mount); not being a mount point is not an error. The test
// harness calls it when it tears an instance down.
func Unmount(mountPoint string) error {
	ok, err := isMountPoint(mountPoint)
	if err != nil || !ok {
		return err
	}
	if err := syscall.Unmount(mountPoint, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting %s: %w", mountPoint, err)
	}
	return nil
}
