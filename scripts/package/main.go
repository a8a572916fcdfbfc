// Command package builds burst's .deb and .rpm with nfpm (`make package`):
// packaging/nfpm.yaml names the contents; the binaries come from -bin, the
// man pages and completions the binaries generated from -gen (where it
// also writes the packaged burst.yaml).
//
//	go run ./scripts/package -version "$(VERSION)" -bin bin -gen dist/gen -out dist
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("package", flag.ContinueOnError)
	describe := fs.String("version", "dev", "the build's version (the Makefile's VERSION: git describe --tags --always --dirty)")
	date := fs.String("date", "", "YYYYMMDD ordering builds without a tag (default: $SOURCE_DATE_EPOCH's day, else today, UTC)")
	config := fs.String("config", "packaging/nfpm.yaml", "nfpm configuration")
	bin := fs.String("bin", "bin", "directory of the five built binaries")
	gen := fs.String("gen", "dist/gen", "directory of the generated man pages (man/) and completions (bash/, zsh/, fish/)")
	out := fs.String("out", "dist", "directory to write the packages into")
	formats := fs.String("formats", "deb,rpm", "package formats, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	day := *date
	if day == "" {
		day = buildDay(os.Getenv("SOURCE_DATE_EPOCH"), time.Now())
	}
	version, err := PackageVersion(*describe, day)
	if err != nil {
		return err
	}
	binAbs, err := filepath.Abs(*bin)
	if err != nil {
		return fmt.Errorf("resolving -bin: %w", err)
	}
	genAbs, err := filepath.Abs(*gen)
	if err != nil {
		return fmt.Errorf("resolving -gen: %w", err)
	}
	// the package's /etc/burst/burst.yaml: the example, pointed at /usr/bin
	if err := writePackagedConfig("examples/burst.yaml", genAbs); err != nil {
		return err
	}
	env := map[string]string{"VERSION": version, "BIN": binAbs, "GEN": genAbs}
	cfg, err := nfpm.ParseFileWithEnvMapping(*config, func(k string) string { return env[k] })
	if err != nil {
		return fmt.Errorf("reading %s: %w", *config, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", *out, err)
	}
	for _, format := range strings.Split(*formats, ",") {
		path, err := build(&cfg, strings.TrimSpace(format), *out)
		if err != nil {
			return fmt.Errorf("building the %s package: %w", format, err)
		}
		fmt.Println(path)
	}
	return nil
}

// buildDay is the UTC day of SOURCE_DATE_EPOCH (reproducible builds), else of now.
func buildDay(epoch string, now time.Time) string {
	var s int64
	if _, err := fmt.Sscan(epoch, &s); err == nil && epoch != "" {
		now = time.Unix(s, 0)
	}
	return now.UTC().Format("20060102")
}

func build(cfg *nfpm.Config, format, out string) (path string, err error) {
	info, err := cfg.Get(format)
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", err
	}
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	path = filepath.Join(out, pkgr.ConventionalFileName(info))
	info.Target = path
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = errors.Join(err, os.Remove(path))
		}
	}()
	return path, pkgr.Package(info, f)
}
