package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// predictFile is the JSON of run --predict FILE: per fault of the
// catalogue (or "*", every fault the file does not name), what the lock's
// profile predicts, amended as a Go lock's Entry.Predict amends it
// (locker.Prediction): wants per property ID, rejected (the fenced
// resource must refuse some of a paused holder's late ops), why.
//
//	{"pause-client": {"wants": {"lease": "violated", "claims": "may"},
//	                  "why": "no watchdog: a paused holder's lease runs out"},
//	 "*": {"wants": {"notice": "any"}}}
type predictFile map[string]predictCell

// predictCell is one fault's amendment.
type predictCell struct {
	Wants    map[string]contract.Want `json:"wants"`
	Rejected *bool                    `json:"rejected"`
	Why      string                   `json:"why"`
}

// readPredictions reads run --predict's file and returns the Predict
// function it says (locker.Entry.Predict). Bad input is an error naming
// the file, the line and the field.
func readPredictions(path string) (func(string, locker.Prediction) locker.Prediction, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--predict: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f predictFile
	if err := dec.Decode(&f); err != nil {
		line := 1
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line += bytes.Count(b[:min(int(se.Offset), len(b))], []byte("\n"))
		case errors.As(err, &te):
			line += bytes.Count(b[:min(int(te.Offset), len(b))], []byte("\n"))
		}
		return nil, fmt.Errorf("--predict %s:%d: %w", path, line, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("--predict %s: text after the JSON object", path)
	}
	if f == nil {
		return nil, fmt.Errorf("--predict %s: want a JSON object of faults, got null", path)
	}
	faults, props := chaos.Faults(), contract.PropertyIDs()
	lineOf := func(key string) int {
		i := bytes.Index(b, []byte(`"`+key+`"`))
		if i < 0 {
			return 1
		}
		return 1 + bytes.Count(b[:i], []byte("\n"))
	}
	var errs []error
	for fault, c := range f {
		if fault != "*" && !slices.Contains(faults, fault) {
			errs = append(errs, fmt.Errorf("--predict %s:%d: fault %q: not a fault of the catalogue (%s, or * for every other)", path, lineOf(fault), fault, strings.Join(faults, ", ")))
			continue
		}
		for prop, w := range c.Wants {
			if !slices.Contains(props, prop) {
				errs = append(errs, fmt.Errorf("--predict %s:%d: %s.wants: property %q: want one of %s", path, lineOf(prop), fault, prop, strings.Join(props, ", ")))
			}
			switch w {
			case contract.WantOK, contract.WantViolated, contract.WantMay, contract.WantAny:
			default:
				errs = append(errs, fmt.Errorf("--predict %s:%d: %s.wants.%s: %q: want ok, violated, may or any", path, lineOf(prop), fault, prop, w))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return func(fault string, p locker.Prediction) locker.Prediction {
		c, ok := f[fault]
		if !ok {
			if c, ok = f["*"]; !ok {
				return p
			}
		}
		p.Wants = maps.Clone(p.Wants) // the profile's may be shared
		for prop, w := range c.Wants {
			p.Set(w, prop)
		}
		if c.Rejected != nil {
			p.Rejected = *c.Rejected
		}
		if c.Why != "" {
			p.Because(c.Why)
		}
		return p
	}, nil
}
