//go:build unix

package ec2emu

import (
	"net"
	"syscall"
)

// setHopLimit makes every packet the connection sends carry the IP TTL (or
// IPv6 hop limit) n, as IMDS sends its responses with the instance's
// HttpPutResponseHopLimit: a client more than n-1 routed hops away (a
// container behind a bridge with routing, say) never gets them.
func setHopLimit(c net.Conn, n int) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	v6 := false
	if a, ok := tc.LocalAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
		v6 = true
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if v6 {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_UNICAST_HOPS, n)
		} else {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, n)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
