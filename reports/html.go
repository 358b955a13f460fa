package reports

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// WriteHTML renders the report as one static, self-contained HTML page (no
// network assets): the headline, the matrix whose cells link to each
// scenario's details, visualization and history, and per scenario its
// verdicts, evidence and an inline SVG plot of operation latency over time
// with fault windows shaded and violations marked. Links are relative to the
// run directory: write the page there.
func WriteHTML(w io.Writer, r *Report) error {
	if err := htmlTemplate().Execute(w, r); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// anchor is the element id of a scenario's section.
func anchor(id string) string {
	var b strings.Builder
	b.WriteString("s-")
	for _, c := range id {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// htmlTemplate parses the page template (a constant: Must cannot fail at run
// time once the tests pass).
func htmlTemplate() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"anchor":  anchor,
		"cstatus": cellStatus,
		"cell":    func(r *Report, lock, fault string) []*ScenarioReport { return r.Cell(lock, fault) },
		"glyph":   glyph,
		"sglyph":  statusGlyph,
		"svg": func(p *Plot) template.HTML {
			if p == nil {
				return ""
			}
			return template.HTML(p.SVG()) // built from numbers and escaped text only
		},
		"shown": func(p *Plot) int { return len(p.Points) },
		"evidence": func(s *ScenarioReport) []PropertyOutcome {
			var out []PropertyOutcome
			for _, p := range s.Properties {
				if p.Evidence != "" {
					out = append(out, p)
				}
			}
			return out
		},
	}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<title>lockproof safety report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
td.fail { background: #fde2e2; } td.inconclusive { background: #f3e8fd; } td.pass { background: #e6f4ea; }
.headline.fail { color: #b00020; } .headline.inconclusive { color: #6a1b9a; } .headline.pass { color: #1b5e20; }
.unexpected { font-weight: bold; color: #b00020; }
section { border-top: 1px solid #ddd; margin-top: 2em; }
small { color: #666; }
</style>
</head>
<body>
<h1>lockproof safety report</h1>
<p class="headline {{.Status}}">{{sglyph .Status}} <strong>{{.Headline}}</strong></p>
{{if gt .Counts.Unknown 0}}<p>Unknown verdicts are not passes: a property whose check did not finish is not shown to hold.</p>{{end}}
{{if .Scenarios}}
<h2>Matrix</h2>
<p>Each scenario: lease (G1) · resource (G2) · liveness (G3). ✅ holds · ❌ violated · ❓ unknown · ➖ not applicable · ⚠️ not what was expected.</p>
<table id="matrix">
<tr><th>lock \ fault</th>{{range .Faults}}<th>{{.}}</th>{{end}}</tr>
{{range $lock := .Locks}}<tr><th>{{$lock}}</th>{{range $fault := $.Faults}}{{$ss := cell $ $lock $fault}}{{if $ss}}<td class="{{cstatus $ss}}">{{range $ss}}<div><a href="#{{anchor .ID}}">{{range .Properties}}{{glyph .Verdict}}{{end}}{{if eq .Status "fail"}} ⚠️{{end}} seed {{.Seed}}</a> <small>{{if .Visualization}}<a href="{{.Visualization}}">viz</a> {{end}}<a href="{{.History}}">history</a></small></div>{{end}}</td>{{else}}<td></td>{{end}}{{end}}</tr>
{{end}}</table>
{{end}}
{{range .Scenarios}}
<section id="{{anchor .ID}}">
<h3>{{sglyph .Status}} {{.ID}}</h3>
<p>lock <strong>{{.Lock}}</strong>, fault <strong>{{.Fault}}</strong>, seed {{.Seed}}: {{.Ops}} ops, {{.Rejected}} rejected for a stale token.
<a href="{{.History}}">history</a> · <a href="{{.Check}}">check.json</a>{{if .Visualization}} · <a href="{{.Visualization}}">Porcupine visualization</a>{{end}}</p>
<table>
<tr><th>property</th><th>verdict</th><th>expected</th><th>outcome</th></tr>
{{range .Properties}}<tr><td>{{.Property}}</td><td>{{glyph .Verdict}} {{.Verdict}}</td><td>{{if .Expected}}{{.Expected}}{{else}}—{{end}}</td><td{{if eq .Outcome "unexpected"}} class="unexpected"{{end}}>{{.Outcome}}</td></tr>
{{end}}</table>
{{with evidence .}}<ul>{{range .}}<li><strong>{{.Property}}</strong>: {{.Evidence}}</li>{{end}}</ul>{{end}}
{{with .Problems}}<ul>{{range .}}<li class="unexpected">broken file: {{.}}</li>{{end}}</ul>{{end}}
{{with .Plot}}<figure>{{svg .}}<figcaption><small>Operation latency over time: {{shown .}} of {{.Ops}} ops drawn; shaded: fault windows; red: ops in a violation; triangles: ops that never returned.</small></figcaption></figure>{{end}}
</section>
{{end}}
</body>
</html>
`))
}
