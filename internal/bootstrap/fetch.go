package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/userdata"
)

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
