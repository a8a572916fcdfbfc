//go:build linux

package ec2emu

import (
	"net"
	"syscall"
	"testing"
)

// The metadata listener sends with the instance's hop limit as IP TTL.
func TestSetHopLimitSetsTheSocketTTL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{1, 3} {
		if err := setHopLimit(c, n); err != nil {
			t.Fatal(err)
		}
		raw, _ := c.(*net.TCPConn).SyscallConn()
		var got int
		var gerr error
		_ = raw.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL) })
		if gerr != nil || got != n {
			t.Errorf("TTL = %d (%v), want %d", got, gerr, n)
		}
	}
}
