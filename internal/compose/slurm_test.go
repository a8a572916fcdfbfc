package compose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
)

// TestSlurmBackend: slurm.api picks the client every program gets.
func TestSlurmBackend(t *testing.T) {
	cfg := configtest.Demo(t)
	cl, err := Slurm(cfg, EnvOf(nil), nil)
	if _, ok := cl.(*slurm.Scontrol); err != nil || !ok {
		t.Fatalf("slurm.api cli: %T, %v; want *slurm.Scontrol", cl, err)
	}
	key := filepath.Join(t.TempDir(), "jwt.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Slurm.API = "rest"
	cfg.Slurm.Rest.URL, cfg.Slurm.Rest.User, cfg.Slurm.Rest.JWTKeyFile = "unix:/run/slurmrestd/slurmrestd.socket", "slurm", key
	cl, err = Slurm(cfg, EnvOf(nil), nil)
	if _, ok := cl.(*rest.Client); err != nil || !ok {
		t.Fatalf("slurm.api rest: %T, %v; want *rest.Client", cl, err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Slurm(cfg, EnvOf(nil), nil); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Fatalf("a world-readable key: %v, want refused", err)
	}
	if _, err := SlurmVia("grpc", cfg.Slurm.Rest, "/usr/bin", "", nil); err == nil {
		t.Fatal("an unknown API was accepted")
	}
}
