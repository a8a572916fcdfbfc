package ec2

import (
	"fmt"
	"os"
	"path/filepath"
)

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

// os_RemoveCache forgets the unavailable-offerings cache of e's provider.
func os_RemoveCache(e *env) error { //nolint:revive
	err := os.Remove(filepath.Join(filepath.Dir(e.prov.cache.path), UnavailableFile))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
