package testkit

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
)

// PeerHasRead reports whether the server end of conn, a TCP connection over IPv4 loopback to a server on
// this machine (the test's own or a child process), has taken in everything conn sent: that end was
// accepted and its receive queue is empty, as the kernel lists it in /proc/net/tcp. A test that must know
// a server is in the middle of reading a request — not merely that the bytes are on their way — waits for
// it with Eventually. Linux only, like the rest of the rig.
func PeerHasRead(t testing.TB, conn net.Conn) bool {
	t.Helper()
	local, err := netip.ParseAddrPort(conn.LocalAddr().String())
	if err != nil {
		t.Fatalf("PeerHasRead: %v", err)
	}
	remote, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil {
		t.Fatalf("PeerHasRead: %v", err)
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatalf("PeerHasRead: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue …
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		// The server's end: its local address is the client's remote one, and the other way round.
		if procAddr(fields[1]) != remote || procAddr(fields[2]) != local {
			continue
		}
		_, rx, _ := strings.Cut(fields[4], ":")
		n, err := strconv.ParseUint(rx, 16, 64)
		return err == nil && n == 0
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("PeerHasRead: %v", err)
	}
	return false // not in the table (yet)
}

// procAddr parses an IPv4 address of /proc/net/tcp: the address's four bytes in the machine's (little
// endian) order, in hex, a colon, and the port in hex.
func procAddr(s string) netip.AddrPort {
	ip, port, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(ip)
	p, err2 := strconv.ParseUint(port, 16, 16)
	if !ok || err != nil || err2 != nil || len(b) != 4 {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}), uint16(p))
}

// FreeAddr returns a loopback address ("127.0.0.1:port") that nothing listens on now, for a process a
// test starts to listen on later. The port is below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where no connection's local port and no ":0" listener is ever
// placed: a port picked by listening on ":0" and closing can be taken by any outgoing connection of the
// loaded machine before the process binds it, and the process then fails with "address already in use".
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func freeAddr() (string, error) {
	low := 32768 // Linux's default start of the range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(b), &low)
	}
	const first = 10000 // above the ports services are commonly given
	if low <= first+1000 {
		return "", fmt.Errorf("the ephemeral port range starts at %d: no room below it for test servers", low)
	}
	for range 200 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(first+rand.IntN(low-first)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use: another test's server, or a service of the machine
		}
		_ = ln.Close()
		return addr, nil
	}
	return "", errors.New("no free port below the ephemeral range after 200 tries")
}
