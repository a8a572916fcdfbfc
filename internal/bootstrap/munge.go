package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

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
