package reports

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

	"github.com/lockproof/lockproof/history"
)

// maxPlotPoints bounds the ops drawn per scenario; ops in violations and ops
// that never returned are always drawn.
const maxPlotPoints = 4000

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

func loadPlot(histPath string, violations map[int]string) (*Plot, error) {
	p := &Plot{Start: math.MaxInt64, End: math.MinInt64}
	var pts []Point
	err := readHistory(histPath, func(op history.Op) error {
		p.Total++
		end := op.Call
		if op.Completed {
			end = op.Return
		}
		p.Start = min(p.Start, op.Call)
		p.End = max(p.End, end)
		if op.Kind == history.Fault {
			p.Faults = append(p.Faults, FaultWindow{Name: op.Name, Start: op.Call, End: op.Return, Open: !op.Completed})
			return nil
		}
		p.Ops++
		lat := int64(-1)
		if op.Completed {
			lat = op.Return - op.Call
		}
		pts = append(pts, Point{
			Line: op.Line, Call: op.Call, Latency: lat, Result: op.Result, Violation: violations[op.Line],
			Label: fmt.Sprintf("line %d: %s %s %s", op.Line, op.Client, op.Kind, op.Result),
		})
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
	// Keep every violation and pending op, and a regular sample of the rest.
	stride := 1
	if len(pts) > maxPlotPoints {
		stride = (len(pts) + maxPlotPoints - 1) / maxPlotPoints
	}
	for i, pt := range pts {
		if i%stride == 0 || pt.Violation != "" || pt.Latency < 0 {
			p.Points = append(p.Points, pt)
		}
	}
	sort.SliceStable(p.Points, func(i, j int) bool { return p.Points[i].Call < p.Points[j].Call })
	return p, nil
}

// SVG renders the plot as a self-contained inline SVG: operation latency
// (log scale) over time, fault windows shaded, ops in violations marked red,
// ops that never returned as triangles along the top.
func (p *Plot) SVG() string {
	const (
		w, h            = 820.0, 220.0
		left, right     = 84.0, 12.0
		top, bottom     = 22.0, 30.0
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
	if hi/lo < 10 {
		hi = lo * 10
	}
	llo, lhi := math.Log10(lo), math.Log10(hi)
	y := func(lat int64) float64 {
		l := math.Log10(math.Max(float64(lat), minLat))
		return top + plotH*(1-(l-llo)/(lhi-llo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img">`, w, h, w, h)
	b.WriteString(`<title>operation latency over time</title>`)
	for _, f := range p.Faults {
		x0, x1 := x(f.Start), x(f.End)
		fmt.Fprintf(&b, `<rect class="fault" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f4a261" fill-opacity="0.25"><title>fault %s</title></rect>`,
			x0, top, math.Max(x1-x0, 1), plotH, html.EscapeString(f.Name+faultSuffix(f)))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`, left, top, plotW, plotH)
	for _, pt := range p.Points {
		title := html.EscapeString(pt.Label + latencyText(pt.Latency) + violationText(pt.Violation))
		cx := x(pt.Call)
		if pt.Latency < 0 {
			fill := "#7b2cbf"
			if pt.Violation != "" {
				fill = "#d00000"
			}
			fmt.Fprintf(&b, `<path class="pending" d="M%.1f %.1fl4 -7h-8z" fill="%s"><title>%s</title></path>`, cx, pendingY+4, fill, title)
			continue
		}
		cy := y(pt.Latency)
		if pt.Violation != "" {
			fmt.Fprintf(&b, `<circle class="violation" cx="%.1f" cy="%.1f" r="5" fill="#d00000" fill-opacity="0.6" stroke="#d00000"><title>%s</title></circle>`, cx, cy, title)
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"><title>%s</title></circle>`, cx, cy, resultColor(pt.Result), title)
	}
	// Axes: latency bounds on the left, time bounds below.
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>`, left-4, top+8, durText(int64(hi)))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>`, left-4, top+plotH, durText(int64(lo)))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">never returned</text>`, left-4, pendingY+2)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10">%s</text>`, left, h-8, durText(0))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>`, left+plotW, h-8, durText(p.End-p.Start))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">time since the first op; latency on a log scale</text>`, left+plotW/2, h-8)
	b.WriteString(`</svg>`)
	return b.String()
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
	case ns < 1e3:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3gµs", float64(ns)/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3gms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3gs", float64(ns)/1e9)
}
