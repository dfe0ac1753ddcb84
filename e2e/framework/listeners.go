//go:build e2e

package framework

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Listener is a socket a process accepts connections or datagrams on.
type Listener struct {
	// Network is tcp, tcp6, udp, udp6 or unix.
	Network string
	// Address is ip:port, or the unix socket's path ("@name" when
	// abstract).
	Address string
}

func (l Listener) String() string { return l.Network + " " + l.Address }

// Listeners returns the listening TCP and unix sockets and the bound UDP
// sockets of process pid, read from /proc: the sockets among its open file
// descriptors, looked up in its network namespace's socket tables.
func Listeners(pid int) ([]Listener, error) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return nil, fmt.Errorf("list file descriptors of %d: %w", pid, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var out []Listener
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		rows, err := procTable(filepath.Join(proc, "net", table))
		if err != nil {
			return nil, err
		}
		for _, f := range rows {
			// sl local rem st ... inode (field 9)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			if strings.HasPrefix(table, "tcp") && f[3] != "0A" { // TCP_LISTEN
				continue
			}
			addr, err := procAddr(f[1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", table, err)
			}
			out = append(out, Listener{Network: table, Address: addr})
		}
	}
	rows, err := procTable(filepath.Join(proc, "net", "unix"))
	if err != nil {
		return nil, err
	}
	for _, f := range rows {
		// Num RefCount Protocol Flags Type St Inode [Path]
		if len(f) < 7 || !inodes[f[6]] {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&0x10000 == 0 { // __SO_ACCEPTCON: listening
			continue
		}
		path := ""
		if len(f) > 7 {
			path = f[7]
		}
		out = append(out, Listener{Network: "unix", Address: path})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// procTable returns the rows of a /proc/net table, split into fields,
// without the header.
func procTable(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		rows = append(rows, strings.Fields(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return rows, nil
}

// procAddr decodes a /proc/net/tcp address ("0100007F:1F90"): the IP as
// 32-bit words in host (little-endian) order, the port in hex.
func procAddr(s string) (string, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	if !ok || err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", fmt.Errorf("bad address %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for b := 0; b < 4; b++ {
			ip[w+b] = raw[w+3-b]
		}
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return "", fmt.Errorf("bad port in %q", s)
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 for a component
// started by a test.
func FreePorts(n int) ([]int, error) { return freePorts(n) }
