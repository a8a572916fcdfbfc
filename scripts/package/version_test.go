package main

import "testing"

func TestPackageVersion(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v0.4", "0.4"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-4-gabc1234", "1.2.3+git4.abc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+git4.abc1234.dirty"},
		{"v1.2.3-rc1-4-gabc1234", "1.2.3~rc1+git4.abc1234"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"0418d05", "0.0.0~git20261201.0418d05"},
		{"0418d05-dirty", "0.0.0~git20261201.0418d05.dirty"},
		{"dev", "0.0.0~git20261201"},
		{"", "0.0.0~git20261201"},
	} {
		got, err := PackageVersion(c.in, "20261201")
		if err != nil || got != c.want {
			t.Errorf("PackageVersion(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"release-one", "v1..2", "v1.2.3 && rm", "../x", "v1.2.3-"} {
		if got, err := PackageVersion(bad, "20261201"); err == nil {
			t.Errorf("PackageVersion(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := PackageVersion("v1", "2026-12-01"); err == nil {
		t.Error("a date not YYYYMMDD was accepted")
	}
}
