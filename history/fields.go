package history

// fieldType is the JSON type of a history field.
type fieldType uint8

// The field types.
const (
	tString fieldType = iota
	tInt              // int64
	tUint             // uint64, never negative
	tBool             // written only when true
)

// fieldID names a history field: its place in the field table (fields),
// the contract's order (docs/DESIGN.md, "Contract: history file"), and its
// bit in a line's fields seen.
type fieldID uint8

// The fields, in the contract's order.
const (
	fClient fieldID = iota
	fOp
	fKey
	fName
	fEvidence
	fCall
	fReturn
	fResult
	fTTL
	fToken
	fValue
	fPrev
	fWait
	fValid
	fInLine
	fLease
	fChecked
	fDeadline
	fHeld
	fHolder
	fHolds
	fRecords
	fBytes
	fMode
	fPermits
	fCapacity
	numFields
)

// field is one member of a history line: its JSON name and type, and
// whether it is written even when zero (op, call).
type field struct {
	name   string
	typ    fieldType
	always bool
}

// fields is the history format's field table, by fieldID: the one place
// a field is declared. The decoder reads each member by it (name, type,
// the errors that name the field), AppendJSON writes each present field
// by it, in its order; the member of Op each fills is get and the set
// functions below, beside it; the ops that may carry it and its bounds are
// its carrier (carriers, validate.go). A new field is a fieldID, an entry
// here, its cases below and its carrier (and, where it relates to another
// field, a rule in validate). An array, not a slice: AppendJSON reads it on every op
// without allocating.
func fields() [numFields]field {
	return [numFields]field{
		fClient:   {name: "client", typ: tString},
		fOp:       {name: "op", typ: tString, always: true},
		fKey:      {name: "key", typ: tString},
		fName:     {name: "name", typ: tString},
		fEvidence: {name: "evidence", typ: tString},
		fCall:     {name: "call", typ: tInt, always: true},
		fReturn:   {name: "return", typ: tInt},
		fResult:   {name: "result", typ: tString},
		fTTL:      {name: "ttl_ms", typ: tInt},
		fToken:    {name: "token", typ: tUint},
		fValue:    {name: "value", typ: tString},
		fPrev:     {name: "prev", typ: tString},
		fWait:     {name: "wait", typ: tBool},
		fValid:    {name: "valid_until", typ: tInt},
		fInLine:   {name: "in_line", typ: tInt},
		fLease:    {name: "lease", typ: tUint},
		fChecked:  {name: "checked", typ: tBool},
		fDeadline: {name: "deadline", typ: tInt},
		fHeld:     {name: "held", typ: tBool},
		fHolder:   {name: "holder", typ: tString},
		fHolds:    {name: "holds", typ: tInt},
		fRecords:  {name: "records", typ: tInt},
		fBytes:    {name: "bytes", typ: tInt},
		fMode:     {name: "mode", typ: tString},
		fPermits:  {name: "permits", typ: tInt},
		fCapacity: {name: "capacity", typ: tInt},
	}
}

// get returns field id of o: whether o carries it (an absent field is not
// written), and its value by the field's type (a flag: present).
func (o *Op) get(id fieldID) (present bool, s string, i int64, u uint64) {
	switch id {
	case fClient:
		return o.Client != "", o.Client, 0, 0
	case fOp:
		return true, string(o.Kind), 0, 0
	case fKey:
		return o.Key != "", o.Key, 0, 0
	case fName:
		return o.Name != "", o.Name, 0, 0
	case fEvidence:
		return o.Evidence != "", o.Evidence, 0, 0
	case fCall:
		return true, "", o.Call, 0
	case fReturn:
		return o.Completed, "", o.Return, 0
	case fResult:
		return o.Result != "", string(o.Result), 0, 0
	case fTTL:
		return o.TTLMillis != 0, "", o.TTLMillis, 0
	case fToken:
		return o.HasToken, "", 0, o.Token
	case fValue:
		return o.HasValue, o.Value, 0, 0
	case fPrev:
		return o.HasPrev, o.Prev, 0, 0
	case fWait:
		return o.Wait, "", 0, 0
	case fValid:
		return o.HasValid, "", o.ValidUntil, 0
	case fInLine:
		return o.HasInLine, "", o.InLine, 0
	case fLease:
		return o.Hold != 0, "", 0, o.Hold
	case fChecked:
		return o.Checked, "", 0, 0
	case fDeadline:
		return o.HasDeadline, "", o.Deadline, 0
	case fHeld:
		return o.Held, "", 0, 0
	case fHolder:
		return o.Holder != "", o.Holder, 0, 0
	case fHolds:
		return o.HasHolds, "", o.HoldCount, 0
	case fRecords:
		return o.HasRecords, "", o.Records, 0
	case fBytes:
		return o.HasBytes, "", o.Bytes, 0
	case fMode:
		return o.Mode != "", string(o.Mode), 0, 0
	case fPermits:
		return o.Permits != 0, "", o.Permits, 0
	case fCapacity:
		return o.Capacity != 0, "", o.Capacity, 0
	}
	return false, "", 0, 0
}

// setString sets the string field id of o to s.
func (d *decoder) setString(o *Op, id fieldID, s []byte) {
	switch id {
	case fClient:
		o.Client = d.interned(s)
	case fOp:
		o.Kind = kindOf(s)
	case fKey:
		o.Key = d.interned(s)
	case fName:
		o.Name = string(s)
	case fEvidence:
		o.Evidence = string(s)
	case fResult:
		o.Result = resultOf(s)
	case fValue:
		o.Value, o.HasValue = string(s), true
	case fPrev:
		o.Prev, o.HasPrev = string(s), true
	case fHolder:
		o.Holder = d.interned(s)
	case fMode:
		o.Mode = modeOf(s)
	}
}

// setInt sets the integer field id of o to v.
func (o *Op) setInt(id fieldID, v int64) {
	switch id {
	case fCall:
		o.Call = v
	case fReturn:
		o.Return, o.Completed = v, true
	case fTTL:
		o.TTLMillis = v
	case fValid:
		o.ValidUntil, o.HasValid = v, true
	case fInLine:
		o.InLine, o.HasInLine = v, true
	case fDeadline:
		o.Deadline, o.HasDeadline = v, true
	case fHolds:
		o.HoldCount, o.HasHolds = v, true
	case fRecords:
		o.Records, o.HasRecords = v, true
	case fBytes:
		o.Bytes, o.HasBytes = v, true
	case fPermits:
		o.Permits = v
	case fCapacity:
		o.Capacity = v
	}
}

// setUint sets the unsigned field id of o to v, or says why v is not a
// value of the field.
func (o *Op) setUint(id fieldID, v uint64) (refused string) {
	switch id {
	case fToken:
		o.Token, o.HasToken = v, true
	case fLease:
		if v == 0 {
			return "0 is not a lease number (they start at 1; leave the field out when unknown)"
		}
		o.Hold = v
	}
	return ""
}

// setFlag sets the flag id of o (a flag is written only when true).
func (o *Op) setFlag(id fieldID) {
	switch id {
	case fWait:
		o.Wait = true
	case fChecked:
		o.Checked = true
	case fHeld:
		o.Held = true
	}
}
