//go:build e2e

package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// auditPolicy records the metadata of every request once, when it
// completes.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditLog is the API server's audit log (Options.Audit).
func (c *Cluster) AuditLog() string { return filepath.Join(c.WorkDir, "logs", "audit.log") }

// AuditKey is what AuditCounts counts requests by.
type AuditKey struct {
	// Client is the requesting binary, from the user agent (for example
	// vc-scheduler, vgpu-device-plugin, kwok).
	Client string
	// Verb is the request verb (get, list, watch, create, update, patch,
	// delete); Resource is resource[/subresource] (pods/binding,
	// nodes/status).
	Verb, Resource string
}

// AuditCounts counts the requests in the audit log by client, verb and
// resource. The log is written before each response (blocking mode), so
// every request answered before the call is counted.
func (c *Cluster) AuditCounts() (map[AuditKey]int, error) {
	f, err := os.Open(c.AuditLog())
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	out := make(map[AuditKey]int)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		// A watch is logged when its response starts and again when it
		// ends; count it once, when it starts.
		if ev.Verb == "watch" && ev.Stage != "ResponseStarted" {
			continue
		}
		k := AuditKey{Client: clientOf(ev.UserAgent), Verb: ev.Verb}
		if ev.ObjectRef != nil {
			k.Resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				k.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		out[k]++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}

// clientOf returns the binary name of a client-go user agent
// ("vc-scheduler/v0.0.0 (linux/amd64) kubernetes/$Format").
func clientOf(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	return name
}
