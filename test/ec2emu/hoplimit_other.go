//go:build !unix

package ec2emu

import "net"

// setHopLimit is not modelled on this platform.
func setHopLimit(net.Conn, int) error { return nil }
