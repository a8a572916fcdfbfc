package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/internal/userdata"
)

// Environment variables burst-agent run reads its per-node settings from.
const (
	EnvNodeName       = "BURST_NODE_NAME"
	EnvSizerURL       = "BURST_SIZER_URL"
	EnvSizerURLs      = "BURST_SIZER_URLS" // comma-separated
	EnvCredentialFile = "BURST_CREDENTIAL_FILE"
	EnvSizerCAFile    = "BURST_SIZER_CA_FILE"
	EnvNonceFile      = "BURST_NONCE_FILE"
	EnvIMDSEndpoint   = "BURST_IMDS_ENDPOINT"
	EnvReportInterval = "BURST_REPORT_INTERVAL"
	EnvCheckpointRoot = "BURST_CHECKPOINT_ROOT"
	EnvLogLevel       = "BURST_LOG_LEVEL"
	EnvGPUSource      = "BURST_GPU_SOURCE"
	EnvSimMemory      = "BURST_SIM_MEMORY_PERCENT"
	// EnvIMDSFirewall lists (space-separated, as Endpoint.String writes
	// them) the endpoints the bootstrap's IMDS firewall closes to non-root
	// users; the agent re-checks the rules and drains the node when they
	// are gone.
	EnvIMDSFirewall = "BURST_IMDS_FIREWALL"
)

// AgentEnv returns the environment (KEY=value) burst-agent run gets. The
// credential is passed as a file path, never as a value, so it does not show
// in /proc/<pid>/environ of other tools or in `systemctl show`; the agent
// renews it in place (and re-exchanges the identity with the nonce file if
// it expired).
func AgentEnv(u userdata.UserData, credentialFile, caFile, nonceFile string) []string {
	env := []string{
		EnvNodeName + "=" + u.NodeName,
		EnvSizerURL + "=" + u.Agent.SizerURL,
		EnvCredentialFile + "=" + credentialFile,
		EnvSizerCAFile + "=" + caFile,
		EnvNonceFile + "=" + nonceFile,
		EnvReportInterval + "=" + time.Duration(u.Agent.ReportInterval).String(),
		EnvCheckpointRoot + "=" + u.FSx.CheckpointRoot,
	}
	if len(u.Agent.SizerURLs) > 0 {
		env = append(env, EnvSizerURLs+"="+strings.Join(u.Agent.SizerURLs, ","))
	}
	if u.Agent.IMDSEndpoint != "" {
		env = append(env, EnvIMDSEndpoint+"="+u.Agent.IMDSEndpoint)
	}
	if u.Agent.LogLevel != "" {
		env = append(env, EnvLogLevel+"="+u.Agent.LogLevel)
	}
	if u.Agent.GPUSource != "" {
		env = append(env, EnvGPUSource+"="+u.Agent.GPUSource)
	}
	if u.Agent.SimMemoryPercent > 0 {
		env = append(env, fmt.Sprintf("%s=%d", EnvSimMemory, u.Agent.SimMemoryPercent))
	}
	return append(env, gpuHealthEnv(u, credentialFile)...)
}

func (b *boot) agent(ctx context.Context) (string, error) {
	cred := filepath.Join(b.o.RunDir, CredentialFileName)
	ca := filepath.Join(b.o.RunDir, "sizer-ca.pem")
	if err := statefile.WriteAtomic(ca, []byte(b.ud.Agent.SizerCA), 0o644); err != nil {
		return "", fmt.Errorf("writing the sizer CA: %w", err)
	}
	u := b.ud
	if b.o.IMDSEndpoint != "" {
		// per instance (a fleet shares one user-data document): the agent uses
		// the metadata service the bootstrap was pointed at
		u.Agent.IMDSEndpoint = b.o.IMDSEndpoint
	}
	env := AgentEnv(u, cred, ca, b.o.NonceFile)
	if len(b.firewalled) > 0 {
		env = append(env, EnvIMDSFirewall+"="+strings.Join(b.firewalled, " "))
	}
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
