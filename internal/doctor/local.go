package doctor

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/burst-hpc/burst/internal/config"
)

// headBinaries are the programs run from slurm.burst_bin: Slurm's
// ResumeProgram, SuspendProgram and controller prolog/epilog, and the
// sizer cli_filter.lua calls (burst-agent runs on the nodes, from the image).
var headBinaries = []string{"burst-resume", "burst-suspend", "burst-sizer"}

func checkBinaries(cfg *config.Config) []Result {
	var out []Result
	for _, b := range headBinaries {
		p := filepath.Join(cfg.Slurm.BurstBin, b)
		res := Result{Check: "binary " + p}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			res.Status, res.Detail, res.Fix = Fail, err.Error(), "install burst there (make install PREFIX=..., or the package), or set slurm.burst_bin in "+cfg.Source
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			res.Status, res.Detail, res.Fix = Fail, "not an executable file ("+fi.Mode().String()+")", "chmod 755 "+p
		case fi.Mode().Perm()&0o022 != 0:
			res.Status, res.Detail, res.Fix = Fail, "writable by group or others ("+fi.Mode().String()+"): Slurm runs it as SlurmUser", "chmod go-w "+p
		default:
			res.Status, res.Detail = OK, "executable"
		}
		out = append(out, res)
	}
	return out
}

func checkSlurm(ctx context.Context, e Env) []Result {
	res := Result{Check: "slurm " + e.SlurmConf}
	if e.Slurm == nil {
		return nil
	}
	ctx, cancel := bounded(ctx, e)
	defer cancel()
	rel, diffs, err := e.Slurm(ctx, e.Cfg, e.SlurmConf)
	switch {
	case err != nil:
		res.Status, res.Detail, res.Fix = Fail, err.Error(), "set slurm.version or slurm.bin_dir in "+e.Cfg.Source+", and pass --slurm-conf if slurm.conf is elsewhere"
	case len(diffs) > 0:
		shown := diffs
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(diffs)-3))
		}
		res.Status, res.Detail = Fail, fmt.Sprintf("Slurm %s; %d difference(s) from what burst.yaml needs: %s", rel, len(diffs), strings.Join(shown, "; "))
		res.Fix = "regenerate with `burst-slurm-conf --out " + e.Cfg.Slurm.ConfDir + "`, Include burst.conf in slurm.conf, then `scontrol reconfigure`; `burst-slurm-conf check` lists every difference"
	default:
		res.Status, res.Detail = OK, "Slurm "+rel+"; slurm.conf includes burst.conf and matches burst.yaml"
	}
	return []Result{res}
}

// fileRule is what a file burst reads must be.
type fileRule struct {
	what, key, path string
	secret          bool // no bits for group or others
}

func checkFiles(cfg *config.Config) []Result {
	s := cfg.Sizer
	rules := []fileRule{
		{"admin token", "sizer.token_file", s.TokenFile, true},
		{"sizer CA certificate", "sizer.tls.ca_file", s.TLS.CAFile, false},
		{"sizer TLS certificate", "sizer.tls.cert_file", s.CertPath(), false},
		{"sizer TLS key", "sizer.tls.key_file", s.KeyPath(), true},
		{"EC2 identity certificate", "sizer.identity_cert", s.IdentityCert, false},
	}
	var out []Result
	for _, r := range rules {
		if r.path == "" {
			continue
		}
		out = append(out, checkFile(cfg, r))
	}
	return out
}

func checkFile(cfg *config.Config, r fileRule) Result {
	res := Result{Check: r.what + " " + r.path}
	fi, err := os.Stat(r.path)
	if err != nil {
		res.Status, res.Detail = Fail, err.Error()
		switch r.key {
		case "sizer.token_file":
			res.Fix = "run `burst-sizer token init`, or set " + r.key + " in " + cfg.Source
		case "sizer.identity_cert":
			res.Fix = "save AWS's published RSA-2048 instance identity certificate of " + cfg.Cluster.Region + " there, or set " + r.key
		default:
			res.Fix = "run `burst-sizer tls init`, or set " + r.key + " in " + cfg.Source
		}
		return res
	}
	mode := fi.Mode()
	owner := ownerOf(fi)
	switch {
	case !mode.IsRegular():
		res.Status, res.Detail, res.Fix = Fail, "not a regular file ("+mode.String()+")", "point "+r.key+" at the file itself"
	case r.secret && mode.Perm()&0o077 != 0:
		res.Status, res.Detail, res.Fix = Fail, fmt.Sprintf("mode %04o (owner %s): readable or writable by group or others", mode.Perm(), owner), "chmod 600 "+r.path
	case mode.Perm()&0o022 != 0:
		res.Status, res.Detail, res.Fix = Fail, fmt.Sprintf("mode %04o (owner %s): writable by group or others, so anyone could replace it", mode.Perm(), owner), "chmod go-w "+r.path
	default:
		res.Status, res.Detail = OK, fmt.Sprintf("mode %04o, owner %s", mode.Perm(), owner)
	}
	return res
}

func ownerOf(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("uid %d", st.Uid)
	}
	return "unknown"
}

func checkStateDir(cfg *config.Config) Result {
	d := cfg.Sizer.StateDir
	res := Result{Check: "state dir " + d}
	fi, err := os.Stat(d)
	switch {
	case err != nil:
		res.Status, res.Detail, res.Fix = Fail, err.Error(), "create it (install -d -m 0750 "+d+") owned by the user burst-sizer serve runs as, or set sizer.state_dir"
		return res
	case !fi.IsDir():
		res.Status, res.Detail, res.Fix = Fail, "not a directory", "set sizer.state_dir to a directory"
		return res
	case fi.Mode().Perm()&0o002 != 0:
		res.Status, res.Detail, res.Fix = Fail, fmt.Sprintf("mode %04o: writable by anyone", fi.Mode().Perm()), "chmod o-w "+d
		return res
	}
	f, err := os.CreateTemp(d, ".doctor-*")
	if err != nil {
		res.Status, res.Detail, res.Fix = Fail, "not writable: "+err.Error(), "run doctor as the user burst-sizer serve runs as, and chown the directory to that user"
		return res
	}
	f.Close()
	os.Remove(f.Name())
	res.Status, res.Detail = OK, fmt.Sprintf("writable, mode %04o, owner %s", fi.Mode().Perm(), ownerOf(fi))
	return res
}
