package contract

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/lockproof/lockproof/internal/jsonobj"
)

// Verdicts holds one verdict per property, keyed by property ID
// (Properties): a summary.json row's verdicts and its expected ones. Its
// JSON form is an object with the properties in Properties order (then
// any other key, sorted), empty verdicts left out.
type Verdicts map[string]Verdict

// MarshalJSON writes the verdicts in Properties order.
func (vs Verdicts) MarshalJSON() ([]byte, error) {
	var ms []jsonobj.Member
	for _, id := range vs.keys() {
		if v := vs[id]; v != "" {
			ms = append(ms, jsonobj.Member{Key: id, Value: v})
		}
	}
	return jsonobj.Object(ms)
}

// keys are the IDs of vs in JSON order: Properties order, then the others sorted.
func (vs Verdicts) keys() []string {
	ids := PropertyIDs()
	var others []string
	for id := range vs {
		if !slices.Contains(ids, id) {
			others = append(others, id)
		}
	}
	sort.Strings(others)
	return append(ids, others...)
}

// Row's JSON form is its fields with one member per property (its
// Verdicts) right after "ops": the order summary.json always had. rowFields
// is Row without its methods, so that encoding/json writes the fields.
type rowFields Row

// MarshalJSON writes the row with its verdicts after "ops".
func (r Row) MarshalJSON() ([]byte, error) {
	var ms []jsonobj.Member
	for _, id := range PropertyIDs() {
		// A property the row predates stays out, as it was.
		if v, ok := r.Verdicts[id]; ok && v != NotChecked {
			ms = append(ms, jsonobj.Member{Key: id, Value: v})
		}
	}
	return jsonobj.Marshal(rowFields(r), "ops", ms)
}

// UnmarshalJSON reads a row and its verdict for every property the file
// has (a row without one leaves it out of Verdicts).
func (r *Row) UnmarshalJSON(b []byte) error {
	var f rowFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	f.Verdicts = Verdicts{}
	err := jsonobj.Each(b, PropertyIDs(), func(id string, m json.RawMessage) error {
		var v Verdict
		err := json.Unmarshal(m, &v)
		f.Verdicts[id] = v
		return err
	})
	*r = Row(f)
	return err
}
