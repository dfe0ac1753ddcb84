package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Column names of the fit table (and of why's cards section); wide adds
// ID, FREE(MiB) and FREE-CORES per card.
var (
	fitColumns     = []string{"NODE", "FITS", "SCORE", "CARDS", "REASON"}
	fitWideColumns = []string{"NODE", "FITS", "SCORE", "CARDS", "ID", "FREE(MiB)", "FREE-CORES", "REASON"}
)

// table renders the nodes' verdicts and a summary line.
func (r *FitReport) table(w io.Writer, wide bool) error {
	if _, err := fmt.Fprintf(w, "Where %s fits now (policy %s):\n\n", r.Request.Describe(r.Device), r.Policy); err != nil {
		return err
	}
	if err := fitTable(w, r.Nodes, wide, ""); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", r.Summary())
	return err
}

// fitTable renders node verdicts: a node that fits in one row with the
// cards chosen; one that does not in a row per node-level reason and per
// run of cards refusing for one reason (each card when wide).
func fitTable(w io.Writer, nodes []NodeFit, wide bool, indent string) error {
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(w, indent+"No nodes found.")
		return err
	}
	tw := newTable(w)
	cells := func(node, fits, score, cards, id, free, cores, reason string) {
		if wide {
			row(tw, indent+node, fits, score, cards, id, free, cores, reason)
		} else {
			row(tw, indent+node, fits, score, cards, reason)
		}
	}
	if wide {
		row(tw, append([]string{indent + fitWideColumns[0]}, fitWideColumns[1:]...)...)
	} else {
		row(tw, append([]string{indent + fitColumns[0]}, fitColumns[1:]...)...)
	}
	for _, n := range nodes {
		if n.Fits {
			idx, ids := make([]string, len(n.Chosen)), make([]string, len(n.Chosen))
			for i, c := range n.Chosen {
				idx[i], ids[i] = itoa(c.Index), c.ID
			}
			cells(n.Name, "yes", strconv.FormatFloat(n.Score, 'f', 0, 64), dash(strings.Join(idx, ",")), dash(strings.Join(ids, ",")), "-", "-", "-")
			continue
		}
		perCard := map[string]bool{}
		for _, v := range n.Cards {
			perCard[v.Reason] = true
		}
		for _, reason := range n.Reasons {
			if !perCard[reason] {
				cells(n.Name, "no", "-", "-", "-", "-", "-", reason)
			}
		}
		for _, run := range foldVerdicts(n.Cards, !wide) {
			v := run.first
			reason := v.Reason
			if reason == "" {
				reason = "fits (the node is short of such cards)"
			}
			cells(n.Name, "no", "-", run.label(), v.ID, i64(v.MemoryFreeMiB), i64(v.CoresFree), reason)
		}
	}
	return tw.Flush()
}

// verdictRun is a card verdict, or a run of consecutive cards with one
// reason.
type verdictRun = span[CardVerdict]

func foldVerdicts(vs []CardVerdict, on bool) []verdictRun {
	return fold(vs, on, func(v CardVerdict) int { return v.Index },
		func(a, b CardVerdict) bool { return a.Reason == b.Reason })
}

// table renders the explanation in sections: the summary, the PodGroup,
// the scheduler's recorded reasons, the events, the cards now, and what
// would have to free up.
func (r *WhyReport) table(w io.Writer, wide bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s.\n", capitalize(r.Summary))
	if len(r.Devices) > 0 {
		fmt.Fprintf(&b, "Asks for: %s.\n", strings.Join(r.Devices, ", "))
	}
	if pg := r.PodGroup; pg != nil {
		fmt.Fprintf(&b, "\nPodGroup %s/%s: phase %s, %d running, minMember %d\n", r.Namespace, pg.Name, dash(pg.Phase), pg.Running, pg.MinMember)
		for _, c := range pg.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s (%s): %s\n", c.Type, c.Status, dash(c.Reason), dash(c.Time), dash(c.Message))
		}
	}
	if c := r.Scheduled; c != nil {
		fmt.Fprintf(&b, "\nPod condition %s=%s %s (%s): %s\n", c.Type, c.Status, dash(c.Reason), dash(c.Time), dash(c.Message))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(r.Recorded) > 0 {
		fmt.Fprintln(w, "\nReasons the scheduler recorded (latest fit error):")
		tw := newTable(w)
		row(tw, "  NODES", "REASON")
		for _, rr := range r.Recorded {
			row(tw, "  "+itoa(rr.Nodes), rr.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := r.eventsTable(w, wide); err != nil {
		return err
	}
	if len(r.Nodes) > 0 {
		fmt.Fprintf(w, "\nCards now (policy %s):\n", r.Policy)
		if err := fitTable(w, r.Nodes, wide, "  "); err != nil {
			return err
		}
	}
	if r.Waiting && len(r.Nodes) > 0 {
		return r.freeUpTable(w)
	}
	return nil
}

// eventsTable lists the events (the last five unless wide).
func (r *WhyReport) eventsTable(w io.Writer, wide bool) error {
	if len(r.Events) == 0 {
		return nil
	}
	events := r.Events
	if !wide && len(events) > 5 {
		fmt.Fprintf(w, "\nEvents (last 5 of %d):\n", len(events))
		events = events[len(events)-5:]
	} else {
		fmt.Fprintln(w, "\nEvents:")
	}
	tw := newTable(w)
	row(tw, "  TIME", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE")
	for _, e := range events {
		row(tw, "  "+dash(e.Time), e.Type, e.Reason, e.Object, strconv.Itoa(int(e.Count)), e.Message)
	}
	return tw.Flush()
}

// freeUpTable lists, per node, the pods whose cards would have to free up.
func (r *WhyReport) freeUpTable(w io.Writer) error {
	if len(r.FreeUp) == 0 {
		_, err := fmt.Fprintln(w, "\nNo node would take the pod even if every pod holding cards there left.")
		return err
	}
	fmt.Fprintln(w, "\nWhat would have to free up (pods whose cards, freed, let the pod fit the node):")
	tw := newTable(w)
	row(tw, "  NODE", "DEVICE", "CARDS", "PODS")
	for _, f := range r.FreeUp {
		cards := make([]string, len(f.Cards))
		for i, c := range f.Cards {
			cards[i] = itoa(c.Index)
		}
		pods := make([]string, len(f.Pods))
		for i, p := range f.Pods {
			pods[i] = fmt.Sprintf("%s/%s (%d MiB, %d cores)", p.Namespace, p.Name, p.MemoryMiB, p.Cores)
		}
		row(tw, "  "+f.Node, f.Device, strings.Join(cards, ","), strings.Join(pods, ", "))
	}
	return tw.Flush()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
