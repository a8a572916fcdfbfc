package ec2

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/statefile"
)

// UnavailableFile is the cache's file name in the state directory.
const UnavailableFile = "unavailable-offerings.json"

// UnavailableCache remembers pools (instance type x zone x capacity type)
// that recently failed with insufficient capacity, so that the next resume
// skips them for TTL. With a directory it lives in a JSON file shared by
// every process (resume is short-lived), updated under an flock; without
// one it lives in memory.
type UnavailableCache struct {
	path string
	ttl  time.Duration
	now  func() time.Time

	mu  sync.Mutex
	mem map[string]unavailableEntry
}

type unavailableEntry struct {
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone"`
	Capacity     string    `json:"capacity"`
	Code         string    `json:"code"`
	Until        time.Time `json:"until"`
}

type unavailableDoc struct {
	Version int                `json:"version"`
	Entries []unavailableEntry `json:"entries"`
}

// NewUnavailableCache makes a cache in dir ("" = in memory only).
func NewUnavailableCache(dir string, ttl time.Duration, now func() time.Time) *UnavailableCache {
	c := &UnavailableCache{ttl: ttl, now: now, mem: map[string]unavailableEntry{}}
	if dir != "" {
		c.path = filepath.Join(dir, UnavailableFile)
	}
	return c
}

func entryKey(typ, zone, capacity string) string { return typ + "/" + zone + "/" + capacity }

// Snapshot returns the pools unavailable now, keyed by Offering.Key.
func (c *UnavailableCache) Snapshot() (map[string]string, error) {
	entries, err := c.live()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, e := range entries {
		out[k] = e.Code
	}
	return out, nil
}

// live returns the entries still unavailable now, by key.
func (c *UnavailableCache) live() (map[string]unavailableEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := c.mem
	if c.path != "" {
		var err error
		if entries, err = c.read(); err != nil {
			return nil, err
		}
	}
	now := c.now()
	out := map[string]unavailableEntry{}
	for k, e := range entries {
		if now.Before(e.Until) {
			out[k] = e
		}
	}
	return out, nil
}

// Mark records offerings as unavailable for the TTL because of code.
func (c *UnavailableCache) Mark(code string, offs ...cloud.Offering) error {
	if len(offs) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	apply := func(m map[string]unavailableEntry) {
		now := c.now()
		for k, e := range m {
			if !now.Before(e.Until) {
				delete(m, k)
			}
		}
		for _, o := range offs {
			m[o.Key()] = unavailableEntry{o.InstanceType, o.Zone, string(o.Capacity), code, now.Add(c.ttl)}
		}
	}
	if c.path == "" {
		apply(c.mem)
		return nil
	}
	err := statefile.Update(c.path, 0o644, func(old []byte) ([]byte, bool, error) {
		m, err := c.decode(old)
		if err != nil {
			m = map[string]unavailableEntry{} // a corrupt cache is rebuilt, not fatal
		}
		apply(m)
		doc := unavailableDoc{Version: 1}
		for _, e := range m {
			doc.Entries = append(doc.Entries, e)
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		return b, err == nil, err
	})
	if err != nil {
		return fmt.Errorf("updating the unavailable-offerings cache: %w", err)
	}
	return nil
}

func (c *UnavailableCache) read() (map[string]unavailableEntry, error) {
	b, err := statefile.Read(c.path)
	if err != nil {
		return nil, fmt.Errorf("reading the unavailable-offerings cache: %w", err)
	}
	return c.decode(b)
}

func (c *UnavailableCache) decode(b []byte) (map[string]unavailableEntry, error) {
	m := map[string]unavailableEntry{}
	if len(b) == 0 {
		return m, nil
	}
	var doc unavailableDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parsing the unavailable-offerings cache %s (delete it to reset): %w", c.path, err)
	}
	for _, e := range doc.Entries {
		m[entryKey(e.InstanceType, e.Zone, e.Capacity)] = e
	}
	return m, nil
}

// UnavailablePool is a pool the cache holds as unavailable until Until.
type UnavailablePool struct {
	InstanceType, Zone, Capacity, Code string
	Until                              time.Time
}

// Pools returns the pools unavailable now (for the dashboard), soonest
// available first.
func (c *UnavailableCache) Pools() ([]UnavailablePool, error) {
	entries, err := c.live()
	if err != nil {
		return nil, err
	}
	var out []UnavailablePool
	for _, e := range entries {
		out = append(out, UnavailablePool(e))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Until.Equal(out[j].Until) {
			return out[i].Until.Before(out[j].Until)
		}
		return entryKey(out[i].InstanceType, out[i].Zone, out[i].Capacity) < entryKey(out[j].InstanceType, out[j].Zone, out[j].Capacity)
	})
	return out, nil
}
