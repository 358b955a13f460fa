package history

import (
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of ignored extra fields, so a hostile line
// cannot exhaust the stack.
const maxDepth = 1000

// fieldError is what is wrong with one line; the reader adds file and line.
type fieldError struct {
	field string // "" for malformed JSON
	msg   string
	// encoding marks a string that is not valid Unicode; the caller that
	// knows which field it was in fills field.
	encoding bool
}

// decoder parses one history line at a time. It is a hand-written parser for
// the flat objects of the contract: the checker reads histories of millions
// of lines, and reflection-based decoding would dominate its start-up.
type decoder struct {
	b       []byte
	i       int
	scratch []byte
	// intern shares the strings that repeat on every line (clients, keys).
	intern map[string]string
	// table is the field table (fields), copied at the first line (ready):
	// a decoder made for one op (UnmarshalJSON) builds no index of it.
	table [numFields]field
	ready bool
}

// bit is field id's bit in a line's fields seen.
func bit(id fieldID) uint32 { return 1 << id }

// init copies the field table into the decoder, once.
func (d *decoder) init() {
	if !d.ready {
		d.table, d.ready = fields(), true
	}
}

// fieldBit is the bit of the field named key in a line's fields seen; 0
// for a field the format does not have (skipped). A scan of the table:
// lines carry a handful of fields, most names differ in length or first
// byte, and no index is built per decoder.
func (d *decoder) fieldBit(key []byte) uint32 {
	for id := range d.table {
		if d.table[id].name == string(key) {
			return bit(fieldID(id))
		}
	}
	return 0
}

func (d *decoder) syntax(format string, args ...any) *fieldError {
	return &fieldError{msg: fmt.Sprintf("malformed JSON at column %d: ", d.i+1) + fmt.Sprintf(format, args...)}
}

func (d *decoder) unexpected(want string) *fieldError {
	if d.i >= len(d.b) {
		return d.syntax("unexpected end of line, want %s", want)
	}
	return d.syntax("unexpected %q, want %s", d.b[d.i], want)
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// blank reports whether line holds only JSON whitespace.
func blank(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}

// parse decodes one line into o and validates it.
func (d *decoder) parse(line []byte, o *Op) *fieldError {
	d.init()
	d.b, d.i = line, 0
	var seen uint32
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return d.unexpected("'{' (one JSON object per line)")
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
	} else {
		for {
			d.ws()
			if d.i >= len(d.b) || d.b[d.i] != '"' {
				return d.unexpected("a field name")
			}
			key, err := d.str()
			if err != nil {
				if err.encoding {
					err.msg = "field name: " + err.msg
				}
				return err
			}
			bit := d.fieldBit(key)
			if bit != 0 {
				if seen&bit != 0 {
					return &fieldError{field: string(key), msg: "duplicate field"}
				}
				seen |= bit
			}
			d.ws()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return d.unexpected("':'")
			}
			d.i++
			d.ws()
			if err := d.field(bit, o, &seen); err != nil {
				if err.encoding && err.field == "" {
					err.field = string(key) // an extra field: named as written
				}
				return err
			}
			d.ws()
			if d.i >= len(d.b) {
				return d.unexpected("',' or '}'")
			}
			if d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.b[d.i] == '}' {
				d.i++
				break
			}
			return d.unexpected("',' or '}'")
		}
	}
	d.ws()
	if d.i != len(d.b) {
		return d.syntax("unexpected %q after the object (one object per line)", d.b[d.i])
	}
	return validate(o, seen)
}

// field decodes the value of the field bit (0: an extra field, skipped). A
// null value counts as absent: its bit is cleared from seen.
func (d *decoder) field(b uint32, o *Op, seen *uint32) *fieldError {
	if b == 0 {
		return d.skip(0)
	}
	if d.null() {
		*seen &^= b
		return nil
	}
	id := fieldID(bits.TrailingZeros32(b))
	f := &d.table[id]
	name := f.name
	switch f.typ {
	case tBool:
		switch {
		case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
			d.i += 4
			o.setFlag(id)
		case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
			d.i += 5
		default:
			if err := d.skip(0); err != nil {
				return err
			}
			return &fieldError{field: name, msg: "want true or false"}
		}
		return nil
	case tString:
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			if err := d.skip(0); err != nil {
				return err
			}
			return &fieldError{field: name, msg: "want a string"}
		}
		s, err := d.str()
		if err != nil {
			if err.encoding {
				err.field = name
			}
			return err
		}
		d.setString(o, id, s)
		return nil
	}
	if d.i >= len(d.b) || (d.b[d.i] != '-' && (d.b[d.i] < '0' || d.b[d.i] > '9')) {
		isString := d.i < len(d.b) && d.b[d.i] == '"'
		if err := d.skip(0); err != nil {
			return err
		}
		if isString {
			return &fieldError{field: name, msg: "want an integer, got a string"}
		}
		return &fieldError{field: name, msg: "want an integer"}
	}
	start := d.i
	integer, err := d.number()
	if err != nil {
		return err
	}
	text := string(d.b[start:d.i])
	if !integer {
		return &fieldError{field: name, msg: "want an integer, got " + text}
	}
	if f.typ == tUint {
		if text[0] == '-' {
			return &fieldError{field: name, msg: "negative " + name + " " + text}
		}
		v, perr := strconv.ParseUint(text, 10, 64)
		if perr != nil {
			return &fieldError{field: name, msg: text + " is out of range"}
		}
		if refused := o.setUint(id, v); refused != "" {
			return &fieldError{field: name, msg: refused}
		}
		return nil
	}
	v, perr := strconv.ParseInt(text, 10, 64)
	if perr != nil {
		return &fieldError{field: name, msg: text + " is out of range"}
	}
	o.setInt(id, v)
	return nil
}

func (d *decoder) interned(s []byte) string {
	if v, ok := d.intern[string(s)]; ok {
		return v
	}
	if d.intern == nil {
		d.intern = make(map[string]string)
	}
	v := string(s)
	if len(d.intern) < 1<<16 {
		d.intern[v] = v
	}
	return v
}

func kindOf(s []byte) Kind {
	for _, k := range opKinds() {
		if string(s) == string(k) {
			return k
		}
	}
	return Kind(s)
}

func modeOf(s []byte) Mode {
	for _, m := range []Mode{ModeRead, ModeWrite, ModePermits} {
		if string(s) == string(m) {
			return m
		}
	}
	return Mode(s)
}

func resultOf(s []byte) Result {
	for _, r := range []Result{OK, Fail, Rejected, Unknown} {
		if string(s) == string(r) {
			return r
		}
	}
	return Result(s)
}

func (d *decoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// number scans a JSON number and reports whether it is an integer (no
// fraction, no exponent).
func (d *decoder) number() (integer bool, err *fieldError) {
	integer = true
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
		}
	default:
		return false, d.unexpected("a digit")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		integer = false
		d.i++
		if d.i >= len(d.b) || d.b[d.i] < '0' || d.b[d.i] > '9' {
			return false, d.unexpected("a digit")
		}
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		integer = false
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.i >= len(d.b) || d.b[d.i] < '0' || d.b[d.i] > '9' {
			return false, d.unexpected("a digit")
		}
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
		}
	}
	return integer, nil
}

// str decodes the JSON string at d.i. The result aliases the line or the
// decoder's scratch buffer: copy it before the next call.
func (d *decoder) str() ([]byte, *fieldError) {
	d.i++ // opening quote
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			d.i++
			return d.b[start : d.i-1], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		d.i++
	}
	if d.i >= len(d.b) {
		return nil, d.syntax("unterminated string")
	}
	// Slow path: escapes, non-ASCII, or a control character.
	buf := append(d.scratch[:0], d.b[start:d.i]...)
	for {
		if d.i >= len(d.b) {
			return nil, d.syntax("unterminated string")
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			d.scratch = buf
			return buf, nil
		case c < 0x20:
			return nil, d.syntax("control character %q in a string (escape it)", c)
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return nil, d.syntax("unterminated string")
			}
			e := d.b[d.i+1]
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(d.b[d.i+2:])
				if !ok {
					d.i += 2
					return nil, d.syntax("bad \\u escape (want 4 hex digits)")
				}
				d.i += 6
				if utf16.IsSurrogate(r) {
					if len(d.b)-d.i >= 6 && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
						if r2, ok := hex4(d.b[d.i+2:]); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								d.i += 6
								buf = utf8.AppendRune(buf, dec)
								continue
							}
						}
					}
					// A lone surrogate is no character: decoding it as
					// U+FFFD would merge distinct names (two clients
					// becoming one hides a violation).
					return nil, d.invalid("lone UTF-16 surrogate \\u%04x", r)
				}
				buf = utf8.AppendRune(buf, r)
				continue
			default:
				d.i++
				return nil, d.syntax("bad escape \\%c", e)
			}
			d.i += 2
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				// Replacing it would merge distinct names, as above.
				return nil, d.invalid("invalid UTF-8 byte 0x%02x", d.b[d.i])
			}
			buf = append(buf, d.b[d.i:d.i+size]...)
			d.i += size
		}
	}
}

// invalid reports a string that is not valid Unicode, at the current column.
func (d *decoder) invalid(format string, args ...any) *fieldError {
	return &fieldError{msg: fmt.Sprintf(format, args...) + fmt.Sprintf(" at column %d (strings must be valid UTF-8)", d.i+1), encoding: true}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skip checks and skips any JSON value (the value of an extra field).
func (d *decoder) skip(depth int) *fieldError {
	if depth > maxDepth {
		return d.syntax("nesting deeper than %d", maxDepth)
	}
	if d.i >= len(d.b) {
		return d.unexpected("a value")
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, err := d.str()
		return err
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == end {
			d.i++
			return nil
		}
		for {
			d.ws()
			if c == '{' {
				if d.i >= len(d.b) || d.b[d.i] != '"' {
					return d.unexpected("a field name")
				}
				if _, err := d.str(); err != nil {
					return err
				}
				d.ws()
				if d.i >= len(d.b) || d.b[d.i] != ':' {
					return d.unexpected("':'")
				}
				d.i++
				d.ws()
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.i < len(d.b) && d.b[d.i] == end {
				d.i++
				return nil
			}
			return d.unexpected(fmt.Sprintf("',' or '%c'", end))
		}
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
				d.i += len(lit)
				return nil
			}
		}
		return d.unexpected("true, false or null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.number()
		return err
	}
	return d.unexpected("a value")
}
