package ec2

import (
	"errors"
	"io/fs"
	"os"
)

// forgetCache deletes the unavailable-offerings cache of e's provider.
func forgetCache(e *env) error {
	if err := os.Remove(e.prov.cache.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
