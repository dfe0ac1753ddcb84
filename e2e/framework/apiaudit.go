//go:build e2e

package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// AuditRequest is one API request as the API server's audit log records
// it (Options.Audit).
type AuditRequest struct {
	User, UserAgent, Verb, RequestURI string
	// APIGroup is "" for the core group.
	APIGroup, Resource, Subresource, Namespace, Name string
	// Code is the response's HTTP status (200 for a watch that started).
	Code int
}

// AuditRequests returns the requests the audit log records for user, each
// once (a watch when it starts, other requests when they complete).
func (c *Cluster) AuditRequests(user string) ([]AuditRequest, error) {
	if !c.audit {
		return nil, fmt.Errorf("the API server writes no audit log (Options.Audit)")
	}
	f, err := os.Open(c.AuditLog())
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	var order []string
	byID := map[string]AuditRequest{}
	started := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			AuditID    string `json:"auditID"`
			Stage      string `json:"stage"`
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			UserAgent  string `json:"userAgent"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				APIGroup    string `json:"apiGroup"`
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		if ev.User.Username != user || started[ev.AuditID] {
			continue
		}
		r := AuditRequest{User: user, UserAgent: ev.UserAgent, Verb: ev.Verb, RequestURI: ev.RequestURI}
		if o := ev.ObjectRef; o != nil {
			r.APIGroup, r.Resource, r.Subresource, r.Namespace, r.Name = o.APIGroup, o.Resource, o.Subresource, o.Namespace, o.Name
		}
		if ev.ResponseStatus != nil {
			r.Code = ev.ResponseStatus.Code
		}
		if _, seen := byID[ev.AuditID]; !seen {
			order = append(order, ev.AuditID)
		}
		byID[ev.AuditID] = r
		started[ev.AuditID] = ev.Stage == "ResponseStarted"
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	out := make([]AuditRequest, 0, len(order))
	for _, id := range order {
		out = append(out, byID[id])
	}
	return out, nil
}
