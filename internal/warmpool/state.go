package warmpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/warmpool/forecast"
)

type stateFile struct {
	Version   int                          `json:"version"`
	Params    forecast.Params              `json:"params"`
	Forecasts map[string]forecast.Snapshot `json:"forecasts"`
	// Seen are the jobs already counted (id -> first seen), so that a
	// restart does not count them again.
	Seen map[uint32]time.Time `json:"seen"`
	// Owned are the pool's nodes (node -> power-up time).
	Owned map[string]time.Time `json:"owned"`
}

func (p *Pool) save() error {
	if p.o.StateFile == "" {
		return nil
	}
	p.mu.Lock()
	sf := stateFile{Version: 1, Params: p.params, Forecasts: map[string]forecast.Snapshot{}, Seen: map[uint32]time.Time{}}
	for name, f := range p.fc {
		sf.Forecasts[name] = f.Snapshot()
	}
	for id, at := range p.seen {
		sf.Seen[id] = at
	}
	sf.Owned = map[string]time.Time{}
	for n, at := range p.owned {
		sf.Owned[n] = at
	}
	p.mu.Unlock()
	b, err := json.Marshal(sf)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.o.StateFile), ".warm-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p.o.StateFile)
}

func (p *Pool) restore() error {
	if p.o.StateFile == "" {
		return nil
	}
	b, err := os.ReadFile(p.o.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return fmt.Errorf("reading %s: %w", p.o.StateFile, err)
	}
	if sf.Version != 1 {
		return fmt.Errorf("%s: version %d, want 1", p.o.StateFile, sf.Version)
	}
	for name, s := range sf.Forecasts {
		if f := p.fc[name]; f != nil {
			if err := f.Restore(s); err != nil {
				return fmt.Errorf("%s: class %s: %w", p.o.StateFile, name, err)
			}
		}
	}
	for id, at := range sf.Seen {
		p.seen[id] = at
	}
	for n, at := range sf.Owned {
		if _, ok := p.o.Config.ClassOfNode(n); ok {
			p.owned[n] = at
		}
	}
	return nil
}
