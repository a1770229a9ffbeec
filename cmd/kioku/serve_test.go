package main

import (
	"net"
	"testing"
)

func TestReachableAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr  string
		names []string
		want  string
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1:8080"},
		{"[::1]:8080", nil, "[::1]:8080"},
		{"10.1.2.3:8443", []string{"kioku.example"}, "10.1.2.3:8443"},
		{"0.0.0.0:8443", nil, "127.0.0.1:8443"},
		{"[::]:8443", nil, "127.0.0.1:8443"},
		{"[::]:8443", []string{"*.example", "kioku.example"}, "kioku.example:8443"},
	} {
		a, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := reachableAddr(a, tc.names); got != tc.want {
			t.Errorf("reachableAddr(%s, %v) = %s, want %s", tc.addr, tc.names, got, tc.want)
		}
	}
}
