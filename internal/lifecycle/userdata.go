package lifecycle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/tlspin"
	"github.com/burst-hpc/burst/internal/userdata"
)

// RenderUserData builds the user-data document for nodes. Nothing in it is
// secret: the node proves who it is to the sizer with its signed identity
// document and gets its credential (and node name) back; the document only
// says where the sizer is and which CA (sizer.tls.ca_file, public) to pin.
// A single node's document names the node; a fleet's names none (every
// instance of a fleet gets the same user data).
func RenderUserData(cfg *config.Config, nodes []cloud.NodeSpec, issued time.Time) (string, error) {
	if len(nodes) == 0 {
		return "", errors.New("no nodes")
	}
	ca, err := os.ReadFile(cfg.Sizer.TLS.CAFile)
	if err != nil {
		return "", fmt.Errorf("reading the sizer CA for user data (sizer.tls.ca_file; `burst-sizer tls init` writes it): %w", err)
	}
	if _, err := tlspin.ParseCA(ca); err != nil {
		return "", fmt.Errorf("%s: %w", cfg.Sizer.TLS.CAFile, err)
	}
	u := userdata.UserData{
		Cluster: cfg.Cluster.Name, IssuedAt: issued.UTC(),
		Slurm: userdata.Slurm{Controllers: []string{cfg.Slurm.Controller}, Port: cfg.Slurm.ControllerPort},
		Munge: userdata.Munge{KeySource: cfg.Slurm.MungeKeySource, KeyPath: cfg.Slurm.MungeKeyPath, Socket: cfg.Slurm.MungeSocket},
		FSx: userdata.FSx{DNSName: cfg.FSx.DNSName, MountName: cfg.FSx.MountName, MountPoint: cfg.FSx.MountPoint,
			CheckpointRoot: filepath.Join(cfg.FSx.MountPoint, cfg.FSx.CheckpointDir)},
		Agent: userdata.Agent{SizerURL: cfg.Sizer.URL, SizerURLs: cfg.Sizer.URLs, SizerCA: string(ca), IMDSEndpoint: cfg.Agent.IMDSEndpoint,
			ReportInterval: userdata.Duration(cfg.Agent.ReportInterval.Duration), LogLevel: cfg.Log.Level,
			GPUSource: cfg.Agent.GPUSource, SimMemoryPercent: cfg.Agent.SimMemoryPercent},
	}
	if g := cfg.GPUHealth; g.Off || g.Interval.Duration > 0 || g.SlowdownAfter.Duration > 0 || g.NVLinkErrors > 0 || len(g.Xid) > 0 || len(g.Events) > 0 || g.DCGMLevel > 0 {
		u.Agent.GPUHealth = &userdata.GPUHealth{Off: g.Off, Interval: userdata.Duration(g.Interval.Duration), SlowdownAfter: userdata.Duration(g.SlowdownAfter.Duration),
			NVLinkErrors: g.NVLinkErrors, Xid: g.Xid, Events: g.Events, DCGMLevel: g.DCGMLevel, DCGMTimeout: userdata.Duration(g.DCGMTimeout.Duration)}
	}
	if len(nodes) == 1 {
		u.NodeName = nodes[0].Node
	}
	if cfg.Slurm.NodeConf == "configless" {
		u.Slurm.ConfMode = userdata.ConfConfigless
	} else {
		u.Slurm.ConfMode, u.Slurm.ConfPath = userdata.ConfFile, cfg.Slurm.NodeConf
	}
	if cfg.FSx.LocalDir != "" {
		u.Test = &userdata.Test{LocalFSDir: cfg.FSx.LocalDir}
	}
	b, err := userdata.Encode(u)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
