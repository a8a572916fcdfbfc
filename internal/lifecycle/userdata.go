package lifecycle

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/userdata"
)

// nodeToken is the node's sizer credential; without the admin token (the
// sizer is not set up) the node gets an unusable random one and its agent's
// reports are refused, which the sizer's metrics show.
func nodeToken(admin, node string) string {
	if admin == "" {
		tok, _ := auth.Generate()
		return "unset-" + tok
	}
	return auth.NodeToken(admin, node)
}

// RenderUserData builds the user-data document for nodes.
func RenderUserData(cfg *config.Config, adminToken string, nodes []cloud.NodeSpec, issued time.Time) (string, error) {
	if len(nodes) == 0 {
		return "", errors.New("no nodes")
	}
	u := userdata.UserData{
		NodeName: nodes[0].Node, Cluster: cfg.Cluster.Name, IssuedAt: issued.UTC(),
		Slurm: userdata.Slurm{Controllers: []string{cfg.Slurm.Controller}, Port: cfg.Slurm.ControllerPort},
		Munge: userdata.Munge{KeySource: cfg.Slurm.MungeKeySource, KeyPath: cfg.Slurm.MungeKeyPath, Socket: cfg.Slurm.MungeSocket},
		FSx: userdata.FSx{DNSName: cfg.FSx.DNSName, MountName: cfg.FSx.MountName, MountPoint: cfg.FSx.MountPoint,
			CheckpointRoot: filepath.Join(cfg.FSx.MountPoint, cfg.FSx.CheckpointDir)},
		Agent: userdata.Agent{SizerURL: cfg.Sizer.URL, IMDSEndpoint: cfg.Agent.IMDSEndpoint,
			ReportInterval: userdata.Duration(cfg.Agent.ReportInterval.Duration), LogLevel: cfg.Log.Level},
	}
	if cfg.Slurm.NodeConf == "configless" {
		u.Slurm.ConfMode = userdata.ConfConfigless
	} else {
		u.Slurm.ConfMode, u.Slurm.ConfPath = userdata.ConfFile, cfg.Slurm.NodeConf
	}
	if len(nodes) > 1 {
		// one document for the whole fleet: each instance finds its entry by
		// its burst:nodes tag and launch index
		u.NodeName = ""
		for _, n := range nodes {
			u.Nodes = append(u.Nodes, userdata.NodeEntry{Name: n.Node, Credential: nodeToken(adminToken, n.Node)})
		}
	} else {
		u.Agent.Credential = nodeToken(adminToken, nodes[0].Node)
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
