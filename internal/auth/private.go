package auth

import (
	"fmt"
	"os"
)

// CheckPrivate checks that path is a regular file that neither its group
// nor other users can read or write (mode 0600 or stricter): burst's
// secrets (the sizer's admin token, Slurm's JWT key, a Slurm token file)
// let whoever reads them act as the cluster's administrator.
func CheckPrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: other users can read or change it; make it readable by its owner only (root or SlurmUser): chmod 600 %s", path, m, path)
	}
	return nil
}
