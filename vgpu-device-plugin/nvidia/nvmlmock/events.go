package nvmlmock

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// EnvEvents names a file whose lines the agent's mock NVML turns into NVML
// events (see FollowEvents). It is read only with --nvml=mock:<machine>: it
// lets an end-to-end test make a simulated card unhealthy from outside the
// agent process, as a real Xid would.
const EnvEvents = "VGPU_MOCK_NVML_EVENTS"

// FollowEvents injects an event for every line of path, and every line
// appended to it, until ctx ends, looking for new lines every interval. A
// missing file is waited for. The file is read from its start: a test
// empties it before it starts an agent that should not see old events.
// Lines are "<GPU UUID> xid <n>" (an Xid critical error) or "<GPU UUID>
// ecc" (a double-bit ECC error); a line that does not parse, or names no
// card of this machine, is logged and skipped. An event whose card has no
// registered event set yet is delivered again at the next look, so a test
// may write it before the agent's health monitor starts.
func (s *Server) FollowEvents(ctx context.Context, path string, interval time.Duration) error {
	var (
		offset  int64
		pending []event
	)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		lines, next, err := readLines(path, offset)
		if err != nil {
			return fmt.Errorf("follow mock NVML events in %s: %w", path, err)
		}
		offset = next
		for _, line := range lines {
			e, err := parseEvent(line)
			if err != nil {
				klog.ErrorS(err, "Ignoring a mock NVML event line", "file", path)
				continue
			}
			pending = append(pending, e)
		}
		pending = s.deliver(pending)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// event is one parsed line.
type event struct {
	uuid      string
	eventType uint64
	data      uint64
}

// deliver injects the events and returns those no event set received yet.
func (s *Server) deliver(events []event) []event {
	var keep []event
	for _, e := range events {
		n, err := s.InjectEvent(e.uuid, e.eventType, e.data)
		switch {
		case err != nil:
			klog.ErrorS(err, "Dropping a mock NVML event", "uuid", e.uuid)
		case n == 0:
			keep = append(keep, e)
		default:
			klog.InfoS("Injected a mock NVML event", "uuid", e.uuid, "type", e.eventType, "data", e.data)
		}
	}
	return keep
}

// readLines returns the complete lines of path after offset and the offset
// after the last of them.
func readLines(path string, offset int64) ([]string, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, offset, nil
	}
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, offset, err
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil, offset, nil // no complete line yet
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data[:end+1]))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines, offset + int64(end) + 1, sc.Err()
}

// parseEvent reads "<uuid> xid <n>" or "<uuid> ecc".
func parseEvent(line string) (event, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[1] == "xid":
		xid, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return event{}, fmt.Errorf("line %q: Xid %q is not a number", line, f[2])
		}
		return event{uuid: f[0], eventType: nvml.EventTypeXidCriticalError, data: xid}, nil
	case len(f) == 2 && f[1] == "ecc":
		return event{uuid: f[0], eventType: nvml.EventTypeDoubleBitEccError}, nil
	}
	return event{}, fmt.Errorf(`line %q: want "<GPU UUID> xid <n>" or "<GPU UUID> ecc"`, line)
}
