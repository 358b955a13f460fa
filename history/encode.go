package history

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends op to dst as one JSON object in the contract's field
// order (the field table, fields: client, op, key, name, evidence, call,
// return, result, ttl_ms, token, value, prev, wait, valid_until, in_line,
// lease, checked, deadline, held, holder, holds), without a trailing
// newline, and returns the extended buffer.
//
// A field is written only when present (its getter says so: client, key,
// name and result when not empty, return when Completed, ttl_ms and lease
// when not 0, a flag when true, token, value, prev, valid_until, in_line,
// deadline and holds when their Has field is set); op and call always.
// AppendJSON does not validate op; Writer.WriteOp does.
func AppendJSON(dst []byte, op Op) []byte {
	dst = append(dst, '{')
	table := fields()
	first := true
	for id, f := range table {
		present, str, num, unum := op.get(fieldID(id))
		if !present && !f.always {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, f.name...)
		dst = append(dst, '"', ':')
		switch f.typ {
		case tString:
			dst = appendString(dst, str)
		case tInt:
			dst = strconv.AppendInt(dst, num, 10)
		case tUint:
			dst = strconv.AppendUint(dst, unum, 10)
		case tBool:
			dst = append(dst, "true"...)
		}
	}
	return append(dst, '}')
}

// MarshalJSON encodes op as AppendJSON does, so that an Op embedded in other
// JSON documents keeps the contract's field names.
func (op Op) MarshalJSON() ([]byte, error) {
	return AppendJSON(nil, op), nil
}

// UnmarshalJSON decodes and validates one operation in the contract's format.
// Errors are *ParseError values (errors.Is(err, ErrBadInput) holds).
func (op *Op) UnmarshalJSON(b []byte) error {
	var d decoder
	var o Op
	if err := d.parse(b, &o); err != nil {
		return &ParseError{Line: op.Line, Field: err.field, Msg: err.msg}
	}
	o.Line = op.Line
	*op = o
	return nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does, so what is written always reads back.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
