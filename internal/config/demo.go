package config

import _ "embed"

// DemoYAML is the embedded default configuration of the local demo cluster.
//
//go:embed demo.yaml
var DemoYAML []byte
