package cards

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Card is one card as a client of the driver sees it (DEV): what a host
// tool such as the container toolkit learns of the GPUs from the driver
// before it sets up a container.
type Card struct {
	// Index is the card's position in the driver's (NVML's, PCI) order.
	Index int
	// UUID is the card's "GPU-..." identifier.
	UUID string
	// TotalBytes is its memory and SMs its multiprocessor count.
	TotalBytes uint64
	SMs        int
	// Minor is its /dev/nvidia<minor> number.
	Minor int
	// PCIBusID is its PCI address ("00000000:07:00.0").
	PCIBusID string
	// Name is its product name.
	Name string
}

// List asks the driver listening on socketPath for its cards (HELLO,
// then DEV for each), in its order. It gives up after timeout.
func List(socketPath string, timeout time.Duration) ([]Card, error) {
	c, err := net.DialTimeout("unix", socketPath, timeout)
	if err != nil {
		return nil, fmt.Errorf("list cards: %w", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("list cards: %w", err)
	}
	r := bufio.NewReader(c)
	ask := func(req string) (string, error) {
		if _, err := fmt.Fprintf(c, "%s\n", req); err != nil {
			return "", fmt.Errorf("list cards: send %s: %w", req, err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("list cards: answer to %s: %w", req, err)
		}
		line = strings.TrimSuffix(line, "\n")
		fields, ok := strings.CutPrefix(line, "OK ")
		if !ok {
			return "", fmt.Errorf("list cards: %s answered %q", req, line)
		}
		return fields, nil
	}
	hello, err := ask("HELLO")
	if err != nil {
		return nil, err
	}
	count, _, _ := strings.Cut(hello, " ")
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("list cards: HELLO answered %q", hello)
	}
	cards := make([]Card, 0, n)
	for d := 0; d < n; d++ {
		dev, err := ask("DEV " + strconv.Itoa(d))
		if err != nil {
			return nil, err
		}
		card, err := parseDev(d, dev)
		if err != nil {
			return nil, fmt.Errorf("list cards: %w", err)
		}
		cards = append(cards, card)
	}
	return cards, nil
}

// parseDev reads DEV's answer fields: "<uuid> <total_bytes> <sm_count>
// <minor> <bus_id> <name>", the name taking the rest of the line.
func parseDev(d int, s string) (Card, error) {
	f := strings.SplitN(s, " ", 6)
	if len(f) != 6 {
		return Card{}, fmt.Errorf("DEV %d answered %q: want 6 fields", d, s)
	}
	total, err1 := strconv.ParseUint(f[1], 10, 64)
	sms, err2 := strconv.Atoi(f[2])
	minor, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return Card{}, fmt.Errorf("DEV %d answered %q: bad number", d, s)
	}
	return Card{Index: d, UUID: f[0], TotalBytes: total, SMs: sms, Minor: minor, PCIBusID: f[4], Name: f[5]}, nil
}
