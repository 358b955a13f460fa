// Package redact keeps a run's secrets out of what it writes. A Redactor
// knows the secrets (the passwords of the deployment a run logs in to,
// the ones lockproof makes for the servers it starts) and replaces each,
// in any text, with Mark: an adapter's error reply that quotes its hello
// request, a lock process's stderr, a server's error reply, a fault's
// error. The runner passes every such text through one Redactor before
// it enters the run's records (summary.json's rows, each scenario's
// history and check.json), so that whatever is derived from them (the
// reports, junit.xml, the progress lines) is clean by construction
// (docs/DESIGN.md, "What is never written").
package redact

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Mark replaces a secret.
const Mark = "[redacted]"

// MinLen is the length (bytes) below which a secret is not redacted. A
// secret that short matches ordinary text everywhere ("ok", a digit of
// a count, a syllable of a word), so redacting it would mangle every
// record, and by where the marks fall tell the secret anyway; and a
// password of three bytes is guessed by trying them all in moments.
const MinLen = 4

// Redactor replaces its secrets in text with Mark. The zero value
// knows no secret and is ready; a nil *Redactor changes nothing. Secrets
// can be added while it is in use (Add): it is safe for concurrent use.
type Redactor struct {
	mu      sync.Mutex // serialises Add
	secrets []string
	rep     atomic.Pointer[strings.Replacer] // nil: no secret
}

// New returns a Redactor of secrets (see Add).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add makes r redact secrets too, from its next String on. Empty ones and
// those shorter than MinLen are ignored.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, s := range secrets {
		if len(s) >= MinLen && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
			added = true
		}
	}
	if !added {
		return
	}
	var all []string
	for _, s := range r.secrets {
		all = append(all, Forms(s)...)
	}
	// Longest first: strings.Replacer tries its old strings in argument
	// order at each position, so a secret that holds another (or a form
	// that holds the raw secret) is replaced whole, not in part.
	slices.SortFunc(all, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	all = slices.Compact(all)
	pairs := make([]string, 0, 2*len(all))
	for _, f := range all {
		pairs = append(pairs, f, Mark)
	}
	r.rep.Store(strings.NewReplacer(pairs...))
}

// String is s with every form (Forms) of every secret of r replaced by
// Mark.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	rep := r.rep.Load()
	if rep == nil {
		return s
	}
	return rep.Replace(s)
}

// Forms are the ways secret may be written in a text that quotes it: as
// it is; JSON-escaped as Go's encoder escapes (<, > and & too), as
// encoders that do not escape those do, and as Python's does (every
// rune beyond ASCII as \uXXXX); each of those JSON-escaped once more (a
// JSON request quoted in a JSON reply); Go-quoted (%q, and its ASCII
// form); URL-escaped (a query, a path, a URL's password); and
// HTML-escaped. The forms are distinct; the first is secret.
func Forms(secret string) []string {
	out := []string{secret}
	add := func(f string) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	type jsonStyle struct{ html, ascii bool }
	styles := []jsonStyle{{html: true}, {}, {ascii: true}}
	for _, a := range styles {
		once := jsonEscape(secret, a.html, a.ascii)
		add(once)
		for _, b := range styles {
			add(jsonEscape(once, b.html, b.ascii))
		}
	}
	add(unquote(strconv.Quote(secret)))
	add(unquote(strconv.QuoteToASCII(secret)))
	add(url.QueryEscape(secret))
	add(url.PathEscape(secret))
	add(strings.TrimPrefix(url.UserPassword("u", secret).String(), "u:"))
	add(html.EscapeString(secret))
	return out
}

// unquote is a quoted string without its quotes.
func unquote(q string) string { return q[1 : len(q)-1] }

// jsonEscape is s as the inside of a JSON string: html escapes <, > and
// & (and U+2028, U+2029) as Go's encoder does, ascii every rune beyond
// ASCII as Python's does (a surrogate pair beyond the BMP).
func jsonEscape(s string, html, ascii bool) string {
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				b.WriteString(`\ufffd`) // an invalid byte, as Go's encoder writes it
				continue
			}
		}
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20, r == 0x7f && ascii,
			html && (r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029),
			ascii && r > 0x7f && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case ascii && r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Handler returns h with every text it is handed redacted by r: the
// message, and each attribute's value (strings, errors, and any value
// whose text or JSON holds a secret, which is then written as its
// redacted text), in groups too. Attributes given to WithAttrs are
// redacted then, with the secrets r knows at that moment. A nil r
// returns h.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil {
		return h
	}
	return &handler{r: r, h: h}
}

type handler struct {
	r *Redactor
	h slog.Handler
}

func (x *handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, x.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(x.attr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = x.attr(a)
	}
	return &handler{r: x.r, h: x.h.WithAttrs(clean)}
}

func (x *handler) WithGroup(name string) slog.Handler {
	return &handler{r: x.r, h: x.h.WithGroup(name)}
}

// attr is a with its value redacted.
func (x *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]slog.Attr, len(g))
		for i, ga := range g {
			clean[i] = x.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		// Written as its text or its JSON, by the handler's kind: when
		// either holds a secret, the redacted text is written instead.
		text := fmt.Sprintf("%+v", v.Any())
		if err, ok := v.Any().(error); ok {
			text = err.Error()
		}
		clean := x.r.String(text)
		if clean != text {
			return slog.String(a.Key, clean)
		}
		if b, err := json.Marshal(v.Any()); err == nil && x.r.String(string(b)) != string(b) {
			return slog.String(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
