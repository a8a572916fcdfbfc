//go:build tools

// Package tools pins modules that parts of burst depend on while those parts
// are written, so go.mod stays stable for concurrent work.
package tools

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	_ "github.com/aws/aws-sdk-go-v2/service/ec2"
	_ "github.com/aws/smithy-go"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/urfave/cli/v2"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
