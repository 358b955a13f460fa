package checker

import (
	"github.com/lockproof/lockproof/history"
)

// Builders for hand-made histories. Times are in milliseconds.

const msNs = int64(1_000_000)

type opt func(*history.Op)

func tok(t uint64) opt    { return func(o *history.Op) { o.Token, o.HasToken = t, true } }
func ttl(ms int64) opt    { return func(o *history.Op) { o.TTLMillis = ms } }
func val(v string) opt    { return func(o *history.Op) { o.Value, o.HasValue = v, true } }
func prev(v string) opt   { return func(o *history.Op) { o.Prev, o.HasPrev = v, true } }
func noReturn() opt       { return func(o *history.Op) { o.Completed, o.Return = false, 0 } }
func atNs(c, r int64) opt { return func(o *history.Op) { o.Call, o.Return = c, r } }
func waits() opt          { return func(o *history.Op) { o.Wait = true } }

func mk(kind history.Kind, client, key string, call, ret float64, res history.Result, opts ...opt) history.Op {
	o := history.Op{Client: client, Kind: kind, Key: key, Call: int64(call * float64(msNs)),
		Return: int64(ret * float64(msNs)), Completed: true, Result: res}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func acq(c string, call, ret float64, res history.Result, opts ...opt) history.Op {
	return mk(history.Acquire, c, "k", call, ret, res, opts...)
}
func rel(c string, call, ret float64, res history.Result, opts ...opt) history.Op {
	return mk(history.Release, c, "k", call, ret, res, opts...)
}
func renew(c string, call, ret float64, res history.Result, opts ...opt) history.Op {
	return mk(history.Renew, c, "k", call, ret, res, opts...)
}
func wr(c string, call, ret float64, res history.Result, v string, opts ...opt) history.Op {
	return mk(history.Write, c, "k", call, ret, res, append([]opt{val(v)}, opts...)...)
}
func rd(c string, call, ret float64, res history.Result, v string, opts ...opt) history.Op {
	if res != history.OK {
		return mk(history.Read, c, "k", call, ret, res, opts...)
	}
	return mk(history.Read, c, "k", call, ret, res, append([]opt{val(v)}, opts...)...)
}
func fault(name string, call, ret float64) history.Op {
	return history.Op{Kind: history.Fault, Name: name, Call: int64(call * float64(msNs)), Return: int64(ret * float64(msNs)), Completed: true}
}

const (
	ok      = history.OK
	fail    = history.Fail
	unknown = history.Unknown
	rej     = history.Rejected
)

// lined numbers ops 1..n as a file would.
func lined(ops ...history.Op) []history.Op {
	for i := range ops {
		ops[i].Line = i + 1
	}
	return ops
}
