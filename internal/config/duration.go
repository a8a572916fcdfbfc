package config

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "90s", "10m", "1h30m".
type Duration struct{ time.Duration }

// D returns a Duration.
func D(d time.Duration) Duration { return Duration{d} }

// UnmarshalYAML parses Go duration syntax, also accepting plain integers as seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration such as 90s or 10m", n.Line)}}
	}
	s := strings.TrimSpace(n.Value)
	if s == "" {
		d.Duration = 0
		return nil
	}
	if v, err := time.ParseDuration(s); err == nil {
		d.Duration = v
		return nil
	}
	var secs int64
	if _, err := fmt.Sscanf(s, "%d", &secs); err == nil && fmt.Sprint(secs) == s {
		d.Duration = time.Duration(secs) * time.Second
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (write e.g. 90s, 10m, 1h30m)", n.Line, s)}}
}

// MarshalYAML writes the Go duration syntax.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }
