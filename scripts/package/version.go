package main

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// v1.2.3, v1.2.3-rc1, each optionally -<n>-g<sha> (commits since the
	// tag) and -dirty, as `git describe --tags --always --dirty` prints
	tagged = regexp.MustCompile(`^v?([0-9]+(?:\.[0-9]+)*)(?:-([0-9A-Za-z.]+?))??(?:-([0-9]+)-g([0-9a-f]+))?(-dirty)?$`)
	// no tag: the abbreviated commit (optionally -dirty)
	untagged = regexp.MustCompile(`^([0-9a-f]{4,40})(-dirty)?$`)
)

// PackageVersion maps the Makefile's VERSION (`git describe --tags --always
// --dirty`, or "dev") onto a version Debian and RPM accept and order the
// same way; both need a leading digit and no '-'. date (YYYYMMDD, the
// commit's) orders builds without a tag:
//
//	v1.2.3               1.2.3
//	v1.2.3-rc1           1.2.3~rc1         (before 1.2.3)
//	v1.2.3-4-gabc1234    1.2.3+git4.abc1234 (after 1.2.3)
//	abc1234              0.0.0~git20261201.abc1234
//	dev                  0.0.0~git20261201
//
// with ".dirty" appended for a dirty tree.
func PackageVersion(describe, date string) (string, error) {
	if !regexp.MustCompile(`^[0-9]{8}$`).MatchString(date) {
		return "", fmt.Errorf("package version: date %q is not YYYYMMDD", date)
	}
	d := strings.TrimSpace(describe)
	if d == "dev" || d == "" {
		return "0.0.0~git" + date, nil
	}
	if m := untagged.FindStringSubmatch(d); m != nil && !strings.Contains(d, ".") {
		v := "0.0.0~git" + date + "." + m[1]
		if m[2] != "" {
			v += ".dirty"
		}
		return v, nil
	}
	m := tagged.FindStringSubmatch(d)
	if m == nil {
		return "", fmt.Errorf("package version: %q is neither a tag like v1.2.3 (git describe --tags) nor a commit; set VERSION=v<major>.<minor>.<patch>", describe)
	}
	v := m[1]
	if m[2] != "" {
		v += "~" + m[2]
	}
	if m[3] != "" {
		v += "+git" + m[3] + "." + m[4]
	}
	if m[5] != "" {
		if m[3] == "" {
			v += "+dirty"
		} else {
			v += ".dirty"
		}
	}
	return v, nil
}
