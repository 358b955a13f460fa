package reports

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/lockproof/lockproof/history"
)

// maxPlotPoints is the point budget of a scenario's plot: plain ops are
// sampled down to it; ops in violations and ops that never returned are
// always drawn.
const maxPlotPoints = 1000

// Plot is the data of a scenario's latency-over-time plot.
type Plot struct {
	Start, End int64 // time span, ns on the history's clock
	Total      int   // lines in the history (faults included)
	Ops        int   // operations (faults excluded); Points holds a sample of them
	Points     []Point
	Faults     []FaultWindow
}

// Point is one op drawn on the plot.
type Point struct {
	Line      int
	Call      int64
	Latency   int64 // ns; -1: the op never returned
	Label     string
	Result    history.Result
	Violation string // "" unless the op is part of a violation
}

// FaultWindow is a shaded fault window; Open: it never ended.
type FaultWindow struct {
	Name       string
	Start, End int64
	Open       bool
}

func loadPlot(open func() (io.ReadCloser, error), histPath string, violations map[int]string) (*Plot, error) {
	p := &Plot{Start: math.MaxInt64, End: math.MinInt64}
	// The history is streamed and sampled as it goes, so a report's memory
	// does not grow with a history's length (review: a 122 KB gzipped
	// history took 95 MB): the plain ops kept are every stride-th, and the
	// stride doubles whenever they reach twice the budget; ops in
	// violations are always kept, and those that never returned up to the
	// budget (the rest join the plain ones).
	var plain, marked []Point
	stride, seen, pending := 1, 0, 0
	err := readHistory(open, histPath, func(op history.Op) error {
		p.Total++
		end := op.Call
		if op.Completed {
			end = op.Return
		}
		p.Start = min(p.Start, op.Call)
		p.End = max(p.End, end)
		if op.Kind == history.Fault {
			if len(p.Faults) < maxPlotPoints {
				p.Faults = append(p.Faults, FaultWindow{Name: op.Name, Start: op.Call, End: op.Return, Open: !op.Completed})
			}
			return nil
		}
		p.Ops++
		lat := int64(-1)
		if op.Completed {
			lat = op.Return - op.Call
		}
		point := func() Point {
			return Point{Line: op.Line, Call: op.Call, Latency: lat, Result: op.Result, Violation: violations[op.Line],
				Label: fmt.Sprintf("line %d: %s %s %s", op.Line, op.Client, op.Kind, op.Result)}
		}
		switch {
		case violations[op.Line] != "":
			marked = append(marked, point())
			return nil
		case lat < 0 && pending < maxPlotPoints:
			pending++
			marked = append(marked, point())
			return nil
		}
		i := seen
		seen++
		if i%stride != 0 {
			return nil
		}
		plain = append(plain, point())
		if len(plain) >= 2*maxPlotPoints {
			stride *= 2
			kept := plain[:0]
			for j := 0; j < len(plain); j += 2 {
				kept = append(kept, plain[j])
			}
			clear(plain[len(kept):])
			plain = kept
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.Total == 0 {
		p.Start, p.End = 0, 0
	}
	for i := range p.Faults {
		if p.Faults[i].Open {
			p.Faults[i].End = p.End
		}
	}
	// Down to the budget: every k-th of the plain ops kept.
	k := (len(plain) + maxPlotPoints - 1) / maxPlotPoints
	for i, pt := range plain {
		if k <= 1 || i%k == 0 {
			p.Points = append(p.Points, pt)
		}
	}
	p.Points = append(p.Points, marked...)
	sort.SliceStable(p.Points, func(i, j int) bool { return p.Points[i].Call < p.Points[j].Call })
	return p, nil
}

// maxMarked bounds the ops drawn with their own element and tooltip (in a
// violation, never returned); beyond it they join the plain dots.
const maxMarked = 300

// SVG renders the plot as a self-contained inline SVG: operation latency
// (log scale, decade ticks) over time (ticks in seconds or milliseconds),
// fault windows shaded, ops in violations marked red with their line and
// rule as a tooltip, ops that never returned as triangles along the top,
// and a legend. Plain ops are drawn as one path per colour (a dot is a
// zero-length segment with a round cap), which keeps a page of a few
// thousand ops in tens of kilobytes.
func (p *Plot) SVG() string {
	const (
		w, h            = 860.0, 250.0
		left, right     = 64.0, 12.0
		top, bottom     = 24.0, 58.0
		plotW, plotH    = w - left - right, h - top - bottom
		pendingY        = top - 10
		minLat, fallMax = 1e3, 1e6 // 1µs floor; 1ms when nothing completed
	)
	span := float64(p.End - p.Start)
	if span <= 0 {
		span = 1
	}
	x := func(t int64) float64 { return left + plotW*float64(t-p.Start)/span }
	lo, hi := math.Inf(1), 0.0
	for _, pt := range p.Points {
		if pt.Latency >= 0 {
			l := math.Max(float64(pt.Latency), minLat)
			lo, hi = math.Min(lo, l), math.Max(hi, l)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = minLat, fallMax
	}
	// Whole decades, so that every tick is a round latency.
	llo, lhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if lhi <= llo {
		lhi = llo + 1
	}
	y := func(lat int64) float64 {
		l := math.Log10(math.Max(float64(lat), minLat))
		return top + plotH*(1-(l-llo)/(lhi-llo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" font-family="sans-serif" font-size="10">`, w, h, w, h)
	b.WriteString(`<title>operation latency over time</title>`)
	for _, f := range p.Faults {
		x0, x1 := x(f.Start), x(f.End)
		fmt.Fprintf(&b, `<rect class="fault" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f4a261" fill-opacity="0.25"><title>fault %s</title></rect>`,
			x0, top, math.Max(x1-x0, 1), plotH, html.EscapeString(f.Name+faultSuffix(f)))
	}
	// Latency ticks: one per decade, with a faint grid line.
	for d := llo; d <= lhi; d++ {
		ty := top + plotH*(1-(d-llo)/(lhi-llo))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			left, ty, left+plotW, ty, left-4, ty+3, durText(int64(math.Pow(10, d))))
	}
	// Time ticks: a round step giving 5 to 10 ticks.
	step := niceStep(span / 8)
	for t := 0.0; t <= span; t += step {
		tx := left + plotW*t/span
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`,
			tx, top+plotH, tx, top+plotH+4, tx, top+plotH+15, durText(int64(t)))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`, left, top, plotW, plotH)
	// Plain dots, one path per colour; marked ops on top, each with a tooltip.
	paths := map[string]*strings.Builder{}
	var colours []string
	marked := 0
	for _, pt := range p.Points {
		cx := x(pt.Call)
		if (pt.Violation != "" || pt.Latency < 0) && marked < maxMarked {
			marked++
			title := html.EscapeString(pt.Label + latencyText(pt.Latency) + violationText(pt.Violation))
			if pt.Latency < 0 {
				fill := "#7b2cbf"
				if pt.Violation != "" {
					fill = "#d00000"
				}
				fmt.Fprintf(&b, `<path class="pending" d="M%.1f %.1fl4 -7h-8z" fill="%s"><title>%s</title></path>`, cx, pendingY+4, fill, title)
				continue
			}
			fmt.Fprintf(&b, `<circle class="violation" cx="%.1f" cy="%.1f" r="4.5" fill="#d00000" fill-opacity="0.6" stroke="#d00000"><title>%s</title></circle>`, cx, y(pt.Latency), title)
			continue
		}
		c := resultColor(pt.Result)
		cy := y(pt.Latency)
		switch {
		case pt.Violation != "":
			c = "#d00000"
		case pt.Latency < 0:
			c, cy = "#7b2cbf", pendingY
		}
		pb, ok := paths[c]
		if !ok {
			pb = &strings.Builder{}
			paths[c] = pb
			colours = append(colours, c)
		}
		fmt.Fprintf(pb, "M%.0f %.0fh0", cx, cy)
	}
	for _, c := range colours {
		fmt.Fprintf(&b, `<path d="%s" stroke="%s" stroke-width="3.5" stroke-linecap="round" fill="none"/>`, paths[c].String(), c)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">no reply</text>`, left-4, pendingY+2)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">time since the first operation</text>`, left+plotW/2, top+plotH+28)
	fmt.Fprintf(&b, `<text x="12" y="%.1f" text-anchor="middle" transform="rotate(-90 12 %.1f)">latency (log scale)</text>`, top+plotH/2, top+plotH/2)
	// Legend.
	lx, ly := left, h-10
	for _, it := range []struct{ shape, colour, label string }{
		{"dot", resultColor(history.OK), "ok"},
		{"dot", resultColor(history.Fail), "failed or refused"},
		{"dot", resultColor(history.Unknown), "unknown outcome"},
		{"big", "#d00000", "in a violation"},
		{"tri", "#7b2cbf", "never returned"},
		{"box", "#f4a261", "fault window"},
	} {
		switch it.shape {
		case "dot":
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, lx+4, ly-3, it.colour)
		case "big":
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s" fill-opacity="0.6"/>`, lx+4, ly-3, it.colour)
		case "tri":
			fmt.Fprintf(&b, `<path d="M%.1f %.1fl4 -7h-8z" fill="%s"/>`, lx+4, ly+1, it.colour)
		case "box":
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="9" height="9" fill="%s" fill-opacity="0.4"/>`, lx, ly-8, it.colour)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, lx+12, ly, it.label)
		lx += 22 + 6*float64(len(it.label))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= raw {
			return m * e
		}
	}
	return 10 * e
}

func faultSuffix(f FaultWindow) string {
	if f.Open {
		return " (never lifted)"
	}
	return ""
}

func latencyText(lat int64) string {
	if lat < 0 {
		return ", never returned"
	}
	return ", " + durText(lat)
}

func violationText(v string) string {
	if v == "" {
		return ""
	}
	return " — VIOLATION " + v
}

func resultColor(r history.Result) string {
	switch r {
	case history.OK:
		return "#2a6f97"
	case history.Unknown:
		return "#7b2cbf"
	default: // fail, rejected
		return "#999999"
	}
}

// durText renders nanoseconds for people: 850ns, 2.1ms, 1.5s.
func durText(ns int64) string {
	switch {
	case ns == 0:
		return "0"
	case ns < 1e3:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3gµs", float64(ns)/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3gms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3gs", float64(ns)/1e9)
}
