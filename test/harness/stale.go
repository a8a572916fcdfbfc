package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	netnsRe = regexp.MustCompile(`^` + Prefix + `-([0-9a-f]{6})-`)
	linkRe  = regexp.MustCompile(`^` + Prefix + `([0-9a-f]{6})(br|v[0-9]+)$`)
)

// CleanupStale removes what crashed earlier runs (killed go test, panics)
// left behind: for every run record in /run/bst-harness whose process is
// gone, the processes carrying its SLURM_CONF, its namespaces, veths, bridge,
// run dir and subnet claim; and any "bst-<id>-*" namespace or "bst<id>..."
// link with no live run. Live runs (also of other concurrent test processes)
// are left alone. It returns what it removed.
func CleanupStale(ctx context.Context, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.Default()
	}
	ipBin, err := findIP()
	if err != nil {
		return nil, err
	}
	c := &Cluster{ipBin: ipBin, log: log}
	// List namespaces and links before reading records: a run writes its
	// record before it makes anything, so whatever we list here has a record
	// by the time we read them, unless the run is dead.
	var nss, links []string
	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			if netnsRe.MatchString(e.Name()) {
				nss = append(nss, e.Name())
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if linkRe.MatchString(i.Name) {
			links = append(links, i.Name)
		}
	}
	live := map[string]bool{}
	var removed []string
	var errs []error
	recs, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	for _, path := range recs {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its run ended (and removed it) since the glob
		}
		var r runRecord
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil || r.ID == "" {
			errs = append(errs, fmt.Errorf("reading run record %s: unreadable (%v); remove it by hand", path, err))
			continue
		}
		if st, err := procStartTime(r.PID); err == nil && st == r.StartTime {
			live[r.ID] = true
			continue
		}
		log.Info("cleaning up crashed harness run", "id", r.ID, "pid", r.PID, "dir", r.Dir)
		if list, err := killEnvOf(r); err != nil {
			errs = append(errs, err)
		} else if len(list) > 0 {
			removed = append(removed, fmt.Sprintf("processes %v in the Slurm root namespace of run %s", list, r.ID))
		}
		if r.Conf != "" {
			if list := pidsWithEnv("SLURM_CONF=" + r.Conf); len(list) > 0 {
				if err := killPids(list); err != nil {
					errs = append(errs, err)
				}
				removed = append(removed, fmt.Sprintf("processes %v of run %s", list, r.ID))
			}
		}
		if r.Dir != "" && strings.Contains(filepath.Base(r.Dir), Prefix+"-"+r.ID) {
			if err := os.RemoveAll(r.Dir); err != nil {
				errs = append(errs, err)
			} else {
				removed = append(removed, r.Dir)
			}
		}
		for _, f := range []string{r.SubnetClaim, path} {
			if f != "" {
				if err := os.Remove(f); err == nil {
					removed = append(removed, f)
				}
			}
		}
	}
	for _, ns := range nss {
		if live[netnsRe.FindStringSubmatch(ns)[1]] {
			continue
		}
		if err := c.deleteNetns(ns, ""); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, "netns "+ns)
		}
	}
	// veths die with their namespaces; bridges last.
	for _, l := range links {
		if live[linkRe.FindStringSubmatch(l)[1]] {
			continue
		}
		if _, err := net.InterfaceByName(l); err != nil {
			continue
		}
		if err := c.ip(ctx, "link", "del", l); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, "link "+l)
		}
	}
	// subnet claims of runs without a record
	claims, _ := filepath.Glob(filepath.Join(stateDir, "subnet-*"))
	for _, cl := range claims {
		b, err := os.ReadFile(cl)
		if err != nil {
			continue
		}
		id := strings.TrimSpace(string(b))
		if _, err := os.Stat(filepath.Join(stateDir, id+".json")); errors.Is(err, os.ErrNotExist) && !live[id] {
			if os.Remove(cl) == nil {
				removed = append(removed, cl)
			}
		}
	}
	return removed, errors.Join(errs...)
}
