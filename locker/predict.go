package locker

import "github.com/lockproof/lockproof/contract"

// Prediction is what the matrix expects of a lock under one fault: a
// verdict per property (contract.Want: ok, violated, may, any), whether
// the fenced resource must refuse some late ops (proof the fault bit), and
// why, in a sentence per prediction that is not plain ok. The reports show
// Why beside every cell.
type Prediction struct {
	// Wants holds the prediction per property ID (contract.PropLease, ...);
	// a property it lacks has no prediction (Want gives contract.WantAny).
	Wants map[string]contract.Want
	// Rejected: the fenced resource must refuse some of a paused holder's
	// late ops (rejected > 0).
	Rejected bool
	// Why explains every prediction that is not plain ok.
	Why string
}

// Want returns the prediction for property prop; contract.WantAny when
// there is none.
func (p Prediction) Want(prop string) contract.Want {
	if w, ok := p.Wants[prop]; ok {
		return w
	}
	return contract.WantAny
}

// Set predicts w for the properties props.
func (p *Prediction) Set(w contract.Want, props ...string) {
	if p.Wants == nil {
		p.Wants = map[string]contract.Want{}
	}
	for _, prop := range props {
		p.Wants[prop] = w
	}
}

// Because adds one sentence to Why.
func (p *Prediction) Because(why string) {
	if p.Why == "" {
		p.Why = why
		return
	}
	p.Why += "; " + why
}

// AllHold returns the prediction that every property of the contract
// holds (contract.PropertyIDs), the start of a row that then says what
// breaks.
func AllHold() Prediction {
	var p Prediction
	p.Set(contract.WantOK, contract.PropertyIDs()...)
	return p
}

// NoPrediction returns the prediction of nothing (contract.WantAny for
// every property), saying why.
func NoPrediction(why string) Prediction { return Prediction{Why: why} }
