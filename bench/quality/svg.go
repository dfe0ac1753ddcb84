package quality

import (
	"fmt"
	"io"
	"strings"
)

// Plot geometry, in SVG user units.
const (
	plotW, plotH  = 640, 400
	plotL, plotB  = 60, 50
	plotT, plotR  = 30, 130
	plotXMin      = 50
	plotYMin      = 50.0
	plotYMax      = 100.0
	plotTickEvery = 10
)

// plotColors are the lines' colours, 7 characters each, cycled.
const plotColors = "#d62728#1f77b4#2ca02c#9467bd#ff7f0e#8c564b#e377c2#7f7f7f#17becf"

// WriteSVG plots the mean allocation % against arrival % for every result
// of one trace, one line per policy.
func WriteSVG(w io.Writer, trace string, results []*Result) error {
	iw, ih := float64(plotW-plotL-plotR), float64(plotH-plotT-plotB)
	x := func(a float64) float64 { return plotL + (a-plotXMin)/(MaxArrival-plotXMin)*iw }
	y := func(v float64) float64 {
		v = min(max(v, plotYMin), plotYMax)
		return plotT + (plotYMax-v)/(plotYMax-plotYMin)*ih
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">%s: GPU allocation vs arrival (mean of seeds)</text>`+"\n", plotL, trace)
	for a := plotXMin; a <= MaxArrival; a += plotTickEvery {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n",
			x(float64(a)), y(plotYMax), x(float64(a)), y(plotYMin), x(float64(a)), y(plotYMin)+16, a)
	}
	for v := plotYMin; v <= plotYMax; v += 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n",
			x(plotXMin), y(v), x(MaxArrival), y(v), x(plotXMin)-6, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">arrived GPU requests, %% of capacity</text>`+"\n", x((plotXMin+MaxArrival)/2), plotH-8)
	fmt.Fprintf(&b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">allocated GPU, %% of capacity</text>`+"\n", y((plotYMin+plotYMax)/2))
	for i, r := range results {
		k := i % (len(plotColors) / 7)
		color := plotColors[7*k : 7*k+7]
		b.WriteString(`<polyline fill="none" stroke-width="1.5" stroke="` + color + `" points="`)
		for a, v := range r.Curve {
			// Below 50% arrival every policy places every pod.
			if a >= plotXMin {
				fmt.Fprintf(&b, "%.1f,%.1f ", x(float64(a)), y(v))
			}
		}
		b.WriteString(`"/>` + "\n")
		ly := float64(plotT + 16*i + 10)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%d" y="%.1f">%s %.2f</text>`+"\n",
			plotW-plotR+10, ly, plotW-plotR+28, ly, color, plotW-plotR+32, ly+4, r.Policy, r.Alloc130)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
