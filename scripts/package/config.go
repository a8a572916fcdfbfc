package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// burstBinLine is slurm.burst_bin in examples/burst.yaml.
var burstBinLine = regexp.MustCompile(`(?m)^  burst_bin: .*$`)

// PackagedConfig is examples/burst.yaml as the package installs it at
// /etc/burst/burst.yaml: slurm.burst_bin names /usr/bin, where the
// package puts the programs (the example names make install's /usr/local/bin).
func PackagedConfig(example []byte) ([]byte, error) {
	if n := len(burstBinLine.FindAllIndex(example, -1)); n != 1 {
		return nil, fmt.Errorf("examples/burst.yaml: want one `  burst_bin:` line under slurm to point at /usr/bin, found %d", n)
	}
	return burstBinLine.ReplaceAll(example, []byte("  burst_bin: /usr/bin           # where the burst package put burst-resume etc. (make install: /usr/local/bin)")), nil
}

// writePackagedConfig writes PackagedConfig(example) to gen/burst.yaml.
func writePackagedConfig(example, gen string) error {
	b, err := os.ReadFile(example)
	if err != nil {
		return fmt.Errorf("reading the example configuration: %w", err)
	}
	out, err := PackagedConfig(b)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", gen, err)
	}
	return os.WriteFile(filepath.Join(gen, "burst.yaml"), out, 0o644)
}
