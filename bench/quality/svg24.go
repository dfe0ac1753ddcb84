package quality

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// keyPoliciesSVG are the policies of the 24-trace plot, in legend order;
// a policy no result has is left out (and when none has, every policy of
// the results is plotted).
func keyPoliciesSVG() []string {
	return []string{PolicyFragment, PolicyFGD, PolicyBuiltin, PolicyBinpack, PolicyBestFit}
}

// Geometry of the 24-trace plot, in SVG user units.
const (
	cmpSlot               = 36  // width per trace, at least
	cmpMinW               = 600 // of the plot area, so that the title fits
	cmpL, cmpR            = 60, 150
	cmpT                  = 40 // above the top panel
	cmpTopH, cmpBotH      = 280, 200
	cmpGap                = 40  // between the panels
	cmpLabels             = 110 // below the bottom panel, for the trace names
	cmpDodge              = 5.0 // horizontal offset between the policies' markers
	cmpMarkerR, cmpWhisk  = 3.0, 3.0
	cmpLegendRow          = 16
	cmpTuningBand, cmpInk = "#f2f2f2", "#333"
)

// WriteComparisonSVG plots the key policies across the traces of results,
// one column per trace (tuning traces shaded and starred). Top panel: the
// unallocated GPU % at 130% arrival, mean over the seeds with its 95% CI
// as a whisker. Bottom panel: each policy minus FGD, paired by seed, with
// the paired 95% CI (below 0: less stranded than FGD). Each policy is one
// <g class="series" data-policy="..."> holding its markers of both panels.
func WriteComparisonSVG(w io.Writer, results []*Result) error {
	traces := traceOrder(results)
	var policies []string
	for _, p := range keyPoliciesSVG() {
		if hasPolicy(results, p) {
			policies = append(policies, p)
		}
	}
	if len(policies) == 0 { // none of the key policies ran: plot those that did
		for _, r := range results {
			if !contains(policies, r.Policy) {
				policies = append(policies, r.Policy)
			}
		}
	}
	if len(traces) == 0 {
		return fmt.Errorf("comparison plot: no results")
	}
	slot := max(cmpSlot, float64(cmpMinW)/float64(len(traces)))
	width := cmpL + int(math.Ceil(slot*float64(len(traces)))) + cmpR
	botT := cmpT + cmpTopH + cmpGap
	height := botT + cmpBotH + cmpLabels
	xc := func(i int) float64 { return cmpL + slot*(float64(i)+0.5) }
	dx := func(k int) float64 { return (float64(k) - float64(len(policies)-1)/2) * cmpDodge }

	// The values: top, every policy's own spread; bottom, its paired margin to FGD.
	top := map[[2]string]Spread{}
	bot := map[[2]string]Spread{}
	for _, t := range traces {
		fgd := find(results, t, PolicyFGD)
		for _, p := range policies {
			r := find(results, t, p)
			if r == nil {
				continue
			}
			s := SpreadOf(r.SeedUnalloc130())
			s.Mean = r.Unalloc130()
			top[[2]string{t, p}] = s
			if fgd != nil && p != PolicyFGD {
				bot[[2]string{t, p}] = SpreadOf(Paired(r, fgd, SeedUnalloc130Of))
			}
		}
	}
	topLo, topHi, topStep := axisRange(top)
	botLo, botHi, botStep := axisRange(bot)
	yTop := func(v float64) float64 { return cmpT + (topHi-v)/(topHi-topLo)*cmpTopH }
	yBot := func(v float64) float64 { return float64(botT) + (botHi-v)/(botHi-botLo)*cmpBotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">Unallocated GPU %% at 130%% arrival, mean and 95%% CI over seeds %s (lower is better; * tuning trace)</text>`+"\n",
		cmpL, xmlText(seedList(results[0].Seeds)))
	for i, t := range traces {
		if IsTuning(t) {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", xc(i)-slot/2, cmpT, slot, botT+cmpBotH-cmpT, cmpTuningBand)
		}
	}
	writeYAxis(&b, topLo, topHi, topStep, yTop, width, "unallocated GPU %")
	writeYAxis(&b, botLo, botHi, botStep, yBot, width, "minus FGD, points")
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", cmpL, yBot(0), width-cmpR, yBot(0), cmpInk)
	for i, t := range traces {
		label, weight := t, "normal"
		if IsTuning(t) {
			label, weight = t+" *", "bold"
		}
		y := botT + cmpBotH + 8
		fmt.Fprintf(&b, `<text transform="translate(%.1f %d) rotate(-60)" text-anchor="end" font-weight="%s">%s</text>`+"\n", xc(i)+4, y, weight, xmlText(label))
	}
	for k, p := range policies {
		color := plotColors[7*(k%(len(plotColors)/7)):][:7]
		fmt.Fprintf(&b, `<g class="series" data-policy="%s" stroke="%s" fill="%s">`+"\n", xmlText(p), color, color)
		for i, t := range traces {
			x := xc(i) + dx(k)
			if s, ok := top[[2]string{t, p}]; ok {
				writeMarker(&b, x, s, yTop, fmt.Sprintf("%s %s: %s", p, t, spreadCell(s)))
			}
			if s, ok := bot[[2]string{t, p}]; ok {
				writeMarker(&b, x, s, yBot, fmt.Sprintf("%s − fgd %s: %s", p, t, spreadCell(s)))
			}
		}
		ly := float64(cmpT + cmpLegendRow*k + 10)
		lx := width - cmpR + 12
		fmt.Fprintf(&b, `<circle cx="%d" cy="%.1f" r="%.1f"/><text x="%d" y="%.1f" stroke="none" fill="%s">%s</text>`+"\n",
			lx, ly, cmpMarkerR+1, lx+10, ly+4, cmpInk, xmlText(p))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return writeString(w, "comparison plot", b.String())
}

// writeMarker draws a mean as a dot and its CI as a whisker (none when the
// CI is unknown), with a tooltip.
func writeMarker(b *strings.Builder, x float64, s Spread, y func(float64) float64, title string) {
	if !math.IsNaN(s.CI) {
		lo, hi := y(s.Mean-s.CI), y(s.Mean+s.CI)
		fmt.Fprintf(b, `<path d="M%.1f %.1fV%.1fM%.1f %.1fh%.1fM%.1f %.1fh%.1f" fill="none"/>`+"\n",
			x, lo, hi, x-cmpWhisk/2, lo, cmpWhisk, x-cmpWhisk/2, hi, cmpWhisk)
	}
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%.1f" stroke="none"><title>%s</title></circle>`+"\n", x, y(s.Mean), cmpMarkerR, xmlText(title))
}

// writeYAxis draws horizontal grid lines and labels every step from lo to
// hi, and the axis title.
func writeYAxis(b *strings.Builder, lo, hi, step float64, y func(float64) float64, width int, title string) {
	for v := lo; v <= hi+step/1e6; v += step {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			cmpL, y(v), width-cmpR, y(v), cmpL-6, y(v)+4, strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", v), "0"), ".0"))
	}
	fmt.Fprintf(b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y(lo)+y(hi))/2, xmlText(title))
}

// axisRange is a range holding 0 and every mean ± CI of m, widened to
// whole steps of 1, 2 or 5 times a power of ten, about five steps in all.
func axisRange(m map[[2]string]Spread) (lo, hi, step float64) {
	for _, s := range m {
		l, h := s.Mean, s.Mean
		if !math.IsNaN(s.CI) {
			l, h = s.Mean-s.CI, s.Mean+s.CI
		}
		lo, hi = math.Min(lo, l), math.Max(hi, h)
	}
	if hi-lo < 1e-9 {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * p
	for _, f := range []float64{1, 2, 5} {
		if f*p >= raw {
			step = f * p
			break
		}
	}
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step, step
}

// xmlText escapes s for an XML attribute or text node.
func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
