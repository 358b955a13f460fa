package reports

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/lockproof/lockproof/contract"
)

// WriteHTML renders the report's index page: static, self-contained (no
// network assets, no script), small enough for a nightly of a thousand
// scenarios. It leads with what needs a person (scenarios not as expected,
// unknown verdicts, detection regressions), then the guarantee sheet (per
// lock, the properties it kept and broke under each fault, with detection
// rate, median detection time, the mechanism and a link to the
// counterexample), then the matrix with seeds grouped per cell. Plots live
// on the scenario pages (WritePages). Links are relative to the run
// directory: write the page there.
func WriteHTML(w io.Writer, r *Report) error {
	if err := pageTemplates().ExecuteTemplate(w, "index", r); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// WritePages writes each scenario's page (ScenarioReport.Page: its
// verdicts, evidence, files and latency plot) under the run directory dir.
// A scenario whose directory is missing (an interrupted run) gets none.
func WritePages(dir string, r *Report) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write scenario pages: %w", err)
	}
	defer root.Close()
	t := pageTemplates()
	for _, s := range r.Scenarios {
		if s.Page == "" || s.NotRun {
			continue
		}
		name := filepath.FromSlash(s.Page)
		if _, err := root.Stat(filepath.Dir(name)); err != nil {
			continue
		}
		if err := writePage(root, name, t, s); err != nil {
			return err
		}
	}
	return nil
}

// writePage writes s's page as name inside root: a name or a link that
// leads out of the run directory is refused.
func writePage(root *os.Root, name string, t *template.Template, s *ScenarioReport) (err error) {
	p := filepath.Join(root.Name(), name)
	f, err := root.Create(name)
	if err != nil {
		return fmt.Errorf("write scenario page: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write scenario page %s: %w", p, cerr)
		}
	}()
	if err := t.ExecuteTemplate(f, "scenario", s); err != nil {
		return fmt.Errorf("write scenario page %s: %w", p, err)
	}
	return nil
}

// anchor is an element id made of the safe characters of id.
func anchor(prefix, id string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, c := range id {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// verdictWord names a property's verdict: whether the property held, not
// whether that was expected (outcomeWord says that).
func verdictWord(v contract.Verdict) string {
	switch v {
	case contract.OK:
		return "held"
	case contract.Violated:
		return "violated"
	case contract.Unknown:
		return "unknown"
	case contract.NA:
		return "n/a"
	case contract.NotChecked:
		return "not checked"
	}
	return string(v)
}

// outcomeWord says how a verdict compares with the prediction.
func outcomeWord(o Outcome) string {
	switch o {
	case AsExpected:
		return "as expected"
	case Unexpected:
		return "NOT as expected"
	case Undecided:
		return "undecided"
	case NoExpected:
		return "no prediction"
	}
	return string(o)
}

// statusWord is a report's, cell's or scenario's status in capitals: a
// pass says what it means, as predicted (a predicted violation is one).
func statusWord(s Status) string {
	switch s {
	case Pass:
		return "AS PREDICTED"
	case Fail:
		return "FAIL"
	}
	return "INCONCLUSIVE"
}

// wantWord spells a prediction for people.
func wantWord(w contract.Want) string {
	switch w {
	case contract.WantOK:
		return "holds"
	case contract.WantViolated:
		return "breaks"
	case contract.WantMay:
		return "may break"
	case contract.WantAny:
		return "no prediction"
	}
	return "not recorded"
}

// msText renders milliseconds for people.
func msText(ms int64) string { return durText(ms * 1e6) }

// cellText is one property of a cell in the sheet and the matrix:
// "held 10/10", "violated 9/10", "unknown 2, held 8/8".
func cellText(p CellProperty) string {
	n := p.Decided()
	var s string
	switch {
	case n == 0 && p.Unknown == 0 && p.NotChecked > 0:
		return "not checked"
	case n == 0 && p.Unknown == 0:
		return "not run"
	case n == 0:
		s = "unknown"
	case p.Violated > 0:
		s = fmt.Sprintf("violated %d/%d", p.Violated, n)
	case p.NA == n:
		s = "n/a"
	default:
		s = fmt.Sprintf("held %d/%d", n-p.Violated, n)
	}
	if p.Unknown > 0 && n > 0 {
		s += fmt.Sprintf(", %d unknown", p.Unknown)
	}
	return s
}

// rel is target (relative to the run directory) as seen from page (also
// relative to the run directory).
func rel(page, target string) string {
	d := path.Dir(page)
	if d == "." {
		return target
	}
	up := strings.Repeat("../", strings.Count(d, "/")+1)
	if strings.HasPrefix(target, d+"/") {
		return strings.TrimPrefix(target, d+"/")
	}
	return up + target
}

// issue is one entry of the index's first sections.
type issue struct {
	Scenario *ScenarioReport
	Property string
	Text     string
}

// unexpectedOf lists what the judge found not as predicted, scenario by
// scenario (their rows' mismatches): each property not as predicted,
// then what is about the whole scenario (its trace, its fault).
func unexpectedOf(r *Report) []issue {
	var out []issue
	for _, s := range r.Scenarios {
		for _, p := range s.Properties {
			if p.Outcome == Unexpected {
				out = append(out, issue{s, p.Property, fmt.Sprintf("%s, predicted %s: %s", verdictWord(p.Verdict), wantWord(p.Want), p.Evidence)})
			}
		}
		for _, m := range s.Mismatches {
			if m.Property != "" && s.Property(m.Property) != nil {
				continue // listed with its property
			}
			out = append(out, issue{s, mismatchSubject(m), mismatchText(s, m)})
		}
	}
	return out
}

// mismatchSubject names what a mismatch of no property of the report is
// about: the trace, the fault, or a property this reader does not know.
func mismatchSubject(m contract.Mismatch) string {
	switch {
	case m.Property != "":
		return m.Property
	case m.Kind == contract.MismatchTrace:
		return "trace"
	case m.Kind == contract.MismatchNoBite:
		return "fault"
	}
	return "scenario"
}

// mismatchText says a mismatch of the scenario s for people.
func mismatchText(s *ScenarioReport, m contract.Mismatch) string {
	if m.Kind == contract.MismatchTrace && s.TraceRejected() && strings.HasPrefix(m.Text, "trace rejected") {
		return traceRejectedText(s)
	}
	return m.Text
}

// traceRejectedText says where the model refused a scenario's history.
func traceRejectedText(s *ScenarioReport) string {
	return fmt.Sprintf("rejected by the TLA+ model (tla/TraceFencedLock.tla): no order of the history takes line %d", s.TraceLine)
}

func unknownOf(r *Report) []issue {
	var out []issue
	for _, s := range r.Scenarios {
		if s.NotRun {
			continue
		}
		for _, p := range s.Properties {
			if p.Outcome == Undecided {
				out = append(out, issue{s, p.Property, p.Evidence})
			}
		}
		for _, pr := range s.Problems {
			out = append(out, issue{s, "files", pr})
		}
	}
	return out
}

// lockSheet is one lock's part of the guarantee sheet: its cells, in
// fault order; sheetOf returns one per lock, in matrix order.
type lockSheet struct {
	Lock  string
	Cells []*CellReport
}

func sheetOf(r *Report) []lockSheet {
	var out []lockSheet
	for _, l := range r.Locks {
		ls := lockSheet{Lock: l}
		for _, f := range r.Faults {
			if c := r.CellOf(l, f); c != nil {
				ls.Cells = append(ls.Cells, c)
			}
		}
		out = append(out, ls)
	}
	return out
}

// pageTemplates parses the index and scenario page templates (constants:
// Must cannot fail at run time once the tests pass).
func pageTemplates() *template.Template {
	return template.Must(template.New("pages").Funcs(template.FuncMap{
		"anchor":     anchor,
		"props":      contract.Properties,
		"verdict":    verdictWord,
		"outcome":    outcomeWord,
		"status":     statusWord,
		"want":       wantWord,
		"ms":         msText,
		"lines":      joinLines,
		"celltext":   cellText,
		"rel":        rel,
		"index":      func() string { return contract.HTMLFile },
		"unexpected": unexpectedOf,
		"unknowns":   unknownOf,
		"sheet":      sheetOf,
		"base":       path.Base,
		"gz":         func(p string) bool { return strings.HasSuffix(p, ".gz") },
		"pct":        func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"cellof":     func(r *Report, lock, fault string) *CellReport { return r.CellOf(lock, fault) },
		"svg": func(p *Plot) template.HTML {
			if p == nil {
				return ""
			}
			return template.HTML(p.SVG()) // built from numbers and escaped text only
		},
	}).Parse(pageCSS + indexPage + scenarioPage))
}

const pageCSS = `{{define "css"}}<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em 2em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.pass { background: #e6f4ea; } .fail { background: #fde2e2; } .inconclusive { background: #f1e6fb; }
.headline { font-size: 1.15em; padding: .4em .7em; border-radius: 4px; display: inline-block; }
.word { font-weight: 600; }
.violated { color: #b00020; font-weight: 600; } .held { color: #1b5e20; } .unknown { color: #6a1b9a; font-weight: 600; }
.bad { color: #b00020; font-weight: 700; }
small, .muted { color: #666; }
nav a { margin-right: 1em; }
td.why { max-width: 36em; font-size: .9em; }
.seeds a { margin-right: .3em; }
</style>{{end}}`

const indexPage = `{{define "index"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>lockproof safety report</title>
{{template "css"}}
</head>
<body>
<h1>lockproof safety report</h1>
<p class="headline {{.Status}}"><span class="word">{{status .Status}}</span>: {{.Headline}}</p>
<p class="muted">{{.Counts.Scenarios}} scenarios in {{len .Cells}} lock × fault cells{{with .Started}}, started {{.}}{{end}}. Properties: {{range $i, $p := props}}{{if $i}}, {{end}}<b>{{$p.ID}}</b> ({{$p.Guarantee}}, {{$p.Summary}}){{end}}. A verdict says whether the property <i>held</i> or was <i>violated</i>; the outcome says whether that is <i>as expected</i> for this lock under this fault. Unknown is never a pass.</p>
{{with .Counts.TraceValidated}}<p class="muted">Trace validation against the TLA+ model: {{.}} fenced-lock histories validated, {{$.Counts.TraceRejected}} rejected.</p>{{end}}
<nav><a href="#unexpected">Not as expected ({{len (unexpected .)}})</a><a href="#unknown">Unknown ({{.Counts.Unknown}})</a><a href="#regressions">Regressions ({{.Counts.Regressions}})</a><a href="#sheet">Guarantee sheet</a><a href="#matrix">Matrix</a></nav>

<h2 id="unexpected">Not as expected</h2>
{{with unexpected .}}<table><tr><th>scenario</th><th>property</th><th>what happened</th></tr>
{{range .}}<tr class="fail"><td><a href="{{.Scenario.Page}}">{{.Scenario.ID}}</a></td><td>{{.Property}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{else}}<p>None: every known verdict is what the guarantees predict.</p>{{end}}

<h2 id="unknown">Unknown</h2>
{{with unknowns .}}<table><tr><th>scenario</th><th>property</th><th>why it is not decided</th></tr>
{{range .}}<tr class="inconclusive"><td><a href="{{.Scenario.Page}}">{{.Scenario.ID}}</a></td><td>{{.Property}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{else}}<p>None: every verdict was decided{{if .Counts.NotRun}} among the scenarios that ran ({{.Counts.NotRun}} did not){{end}}.</p>{{end}}

<h2 id="regressions">Regressions</h2>
{{$any := false}}{{range .Cells}}{{if .Regressions}}{{$any = true}}{{end}}{{end}}
{{if $any}}<table><tr><th>lock × fault</th><th>what fell</th></tr>
{{range .Cells}}{{$c := .}}{{range .Regressions}}<tr class="fail"><td><a href="#{{anchor "c-" (printf "%s-%s" $c.Lock $c.Fault)}}">{{$c.Lock}} × {{$c.Fault}}</a></td><td>{{.}}</td></tr>
{{end}}{{end}}</table>{{else}}<p>None: no cell finds a predicted break less often than its promised rate allows by chance.</p>{{end}}

<h2 id="sheet">Guarantee sheet</h2>
<p class="muted">Per lock and fault, over the seeds: how many seeds each property held or was violated on, the median time from the fault to the first violation, and the mechanism that explains a break. "violated 9/10" reads: broken on 9 of the 10 seeds that decided. The outcome below each verdict compares it with the prediction.</p>
{{range sheet .}}<h3 id="{{anchor "l-" .Lock}}">{{.Lock}}</h3>
<table><tr><th>fault</th>{{range props}}<th>{{.ID}} ({{.Guarantee}})</th>{{end}}<th>why it breaks</th></tr>
{{range .Cells}}{{$c := .}}<tr id="{{anchor "c-" (printf "%s-%s" .Lock .Fault)}}"><th>{{.Fault}}</th>
{{range .Properties}}<td class="{{if eq .Outcome "unexpected"}}fail{{else if eq .Outcome "unknown"}}inconclusive{{end}}"><span class="{{if gt .Violated 0}}violated{{else if gt .Unknown 0}}unknown{{else}}held{{end}}">{{celltext .}}</span>{{with .DetectMedianMs}} <small>· median {{ms .}}</small>{{end}}
<br/><small>predicted: {{want .Want}}{{if .Promised}} (≥ {{pct .Promised}} of seeds){{end}} · <span class="{{if eq .Outcome "unexpected"}}bad{{end}}">{{outcome .Outcome}}</span></small>{{if .Counterexample}}{{$p := .}}{{range $c.Seeds}}{{if eq .ID $p.Counterexample}}<br/><small><a href="{{.Page}}">counterexample {{.ID}}</a>{{with $p.Lines}}, lines {{lines .}}{{end}}</small>{{end}}{{end}}{{end}}</td>
{{end}}<td class="why">{{with .Why}}{{.}}{{else}}<span class="muted">every property predicted to hold</span>{{end}}{{range .Regressions}}<br/><span class="bad">regression: {{.}}</span>{{end}}</td></tr>
{{end}}</table>
{{end}}

<h2 id="matrix">Matrix</h2>
<p class="muted">Each cell sums its seeds up ({{range $i, $p := props}}{{if $i}} · {{end}}{{$p.ID}}{{end}}) and links each seed's page; the colour is the cell's status: green as expected, red not as expected, purple undecided.</p>
<table><tr><th>lock \ fault</th>{{range .Faults}}<th>{{.}}</th>{{end}}</tr>
{{range $lock := .Locks}}<tr><th><a href="#{{anchor "l-" $lock}}">{{$lock}}</a></th>{{range $fault := $.Faults}}{{with cellof $ $lock $fault}}<td class="{{.Status}}"><span class="word">{{status .Status}}</span><br/>{{range .Properties}}<small>{{.Property}}: {{celltext .}}</small><br/>{{end}}<small class="seeds">seeds: {{range .Seeds}}{{if .NotRun}}<span title="{{.ID}}: not run (interrupted)">{{.Seed}}</span> {{else}}<a href="{{.Page}}" title="{{.ID}}: {{status .Status}}">{{.Seed}}</a>{{end}}{{end}}</small></td>{{else}}<td></td>{{end}}{{end}}</tr>
{{end}}</table>
<p class="muted">Files: summary.json (the contract), report.json, report.md, junit.xml; per scenario its directory with history.jsonl (gzip-compressed as history.jsonl.gz where the run was trimmed), check.json and, for kept violations, porcupine.html.</p>
</body>
</html>
{{end}}`

const scenarioPage = `{{define "scenario"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.ID}}: lockproof scenario</title>
{{template "css"}}
</head>
<body>
<p><a href="{{rel .Page index}}">← safety report</a></p>
<h1>{{.ID}}</h1>
<p class="headline {{.Status}}"><span class="word">{{status .Status}}</span></p>
<p>Lock <b>{{.Lock}}</b> under fault <b>{{.Fault}}</b>{{with .FaultName}} (<code>{{.}}</code>{{with $.FaultStartMs}}, from {{ms .}} into the run{{end}}){{end}}, seed {{.Seed}}: {{.Ops}} operations, {{.Rejected}} refused for a stale token{{if .ElapsedMs}}, {{ms .ElapsedMs}} of wall time{{end}}{{with .Started}}, started {{.}}{{end}}.</p>
{{with .FaultEvidence}}<p>What the fault did: {{.}}.</p>{{end}}
{{with .StallNote}}<p>Stalls the run's processes saw (not injected; each excuses what a pause of its clients may cause): {{.}}.</p>{{end}}
<p>Trace validation against the TLA+ model (<code>tla/TraceFencedLock.tla</code>): {{if .TraceAccepted}}<b>accepted</b>: an order of the history consistent with real time follows the model{{else if .TraceRejected}}<b class="bad">REJECTED</b>: no order takes history line {{.TraceLine}}{{else if .TraceNoVerdict}}<b>no verdict</b>: {{.TraceError}}{{else}}not run (<code>lockproof run --tla-jar</code>, fenced lock only){{end}}.</p>
<table><tr><th>property</th><th>verdict</th><th>predicted</th><th>outcome</th><th>found after the fault</th><th>evidence</th></tr>
{{range .Properties}}<tr><td>{{.Property}}</td><td class="{{if eq .Verdict "violated"}}violated{{else if eq .Verdict "unknown"}}unknown{{end}}">{{verdict .Verdict}}</td><td>{{want .Want}}</td><td class="{{if eq .Outcome "unexpected"}}bad{{end}}">{{outcome .Outcome}}</td><td>{{with .DetectMs}}{{ms .}}{{else}}—{{end}}</td><td>{{.Evidence}}</td></tr>
{{end}}</table>
{{with .Mismatches}}<h2>Not as predicted</h2><ul>{{range .}}<li class="bad">{{.Text}}</li>{{end}}</ul>{{end}}
{{with .Problems}}<h2>Problems</h2><ul>{{range .}}<li class="bad">{{.}}</li>{{end}}</ul>{{end}}
<h2>Files</h2>
<ul>
<li><a href="{{rel .Page .History}}">{{base .History}}</a>{{if gz .History}} <small>(gzip-compressed: <code>lockproof check</code> and <code>zcat</code> read it)</small>{{end}}: every operation, one JSON line each</li>
{{with .Check}}<li><a href="{{rel $.Page .}}">check.json</a>: the checker's result</li>{{end}}
{{if .Visualization}}<li><a href="{{rel .Page .Visualization}}">Porcupine visualization</a></li>{{else}}<li class="muted">no Porcupine page{{if gz .History}} (trimmed; <code>lockproof check --html PAGE HISTORY</code> makes one){{end}}</li>{{end}}
</ul>
{{with .Plot}}<h2>Operations over time</h2>
<figure>{{svg .}}<figcaption><small>Each dot is an operation at the time it was called (x) with its latency (y, log scale): {{len .Points}} of {{.Ops}} operations drawn (every one in a violation or never returned, a regular sample of the rest). Shaded: fault windows.</small></figcaption></figure>{{end}}
</body>
</html>
{{end}}`
