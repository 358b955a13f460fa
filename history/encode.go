package history

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends op to dst as one JSON object in the contract's field
// order (client, op, key, name, evidence, call, return, result, ttl_ms,
// token, value, prev, wait, valid_until, in_line, lease, checked, deadline), without a trailing newline, and returns the extended buffer.
//
// Optional fields are written only when present: client, key, name and result
// when not empty, return when Completed, ttl_ms when not 0, token when
// HasToken, value when HasValue, prev when HasPrev, wait and checked when
// true, valid_until when HasValid, in_line when HasInLine, lease when not 0,
// deadline when HasDeadline. AppendJSON does not
// validate op; Writer.WriteOp does.
func AppendJSON(dst []byte, op Op) []byte {
	dst = append(dst, '{')
	first := true
	sep := func() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
	}
	if op.Client != "" {
		sep()
		dst = append(dst, `"client":`...)
		dst = appendString(dst, op.Client)
	}
	sep()
	dst = append(dst, `"op":`...)
	dst = appendString(dst, string(op.Kind))
	if op.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = appendString(dst, op.Key)
	}
	if op.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, op.Name)
	}
	if op.Evidence != "" {
		dst = append(dst, `,"evidence":`...)
		dst = appendString(dst, op.Evidence)
	}
	dst = append(dst, `,"call":`...)
	dst = strconv.AppendInt(dst, op.Call, 10)
	if op.Completed {
		dst = append(dst, `,"return":`...)
		dst = strconv.AppendInt(dst, op.Return, 10)
	}
	if op.Result != "" {
		dst = append(dst, `,"result":`...)
		dst = appendString(dst, string(op.Result))
	}
	if op.TTLMillis != 0 {
		dst = append(dst, `,"ttl_ms":`...)
		dst = strconv.AppendInt(dst, op.TTLMillis, 10)
	}
	if op.HasToken {
		dst = append(dst, `,"token":`...)
		dst = strconv.AppendUint(dst, op.Token, 10)
	}
	if op.HasValue {
		dst = append(dst, `,"value":`...)
		dst = appendString(dst, op.Value)
	}
	if op.HasPrev {
		dst = append(dst, `,"prev":`...)
		dst = appendString(dst, op.Prev)
	}
	if op.Wait {
		dst = append(dst, `,"wait":true`...)
	}
	if op.HasValid {
		dst = append(dst, `,"valid_until":`...)
		dst = strconv.AppendInt(dst, op.ValidUntil, 10)
	}
	if op.HasInLine {
		dst = append(dst, `,"in_line":`...)
		dst = strconv.AppendInt(dst, op.InLine, 10)
	}
	if op.Lease != 0 {
		dst = append(dst, `,"lease":`...)
		dst = strconv.AppendUint(dst, op.Lease, 10)
	}
	if op.Checked {
		dst = append(dst, `,"checked":true`...)
	}
	if op.HasDeadline {
		dst = append(dst, `,"deadline":`...)
		dst = strconv.AppendInt(dst, op.Deadline, 10)
	}
	if op.Held {
		dst = append(dst, `,"held":true`...)
	}
	if op.Holder != "" {
		dst = append(dst, `,"holder":`...)
		dst = appendString(dst, op.Holder)
	}
	if op.HasHolds {
		dst = append(dst, `,"holds":`...)
		dst = strconv.AppendInt(dst, op.HoldCount, 10)
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
