package locker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/locker"
)

func open(locker.Deps) (locker.Locker, error) { return nil, nil }

// TestRegistry: entries are kept in order, looked up by name; a bad or
// taken name, a nil opener, an unknown profile are refused naming the
// field; Open refuses an unknown name and a lock whose needs Deps lacks.
func TestRegistry(t *testing.T) {
	r, err := locker.NewRegistry(
		locker.Entry{Name: "a", Open: open},
		locker.Entry{Name: "b-2", Open: open, Profile: locker.ProfileLease, Needs: locker.Needs{Redlock: true}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); len(got) != 2 || got[0] != "a" || got[1] != "b-2" {
		t.Fatalf("Names() = %v", got)
	}
	if e, ok := r.Lookup("a"); !ok || e.Profile != locker.ProfileFenced {
		t.Fatalf("Lookup(a) = %+v, %v; want the entry with the default profile (fenced)", e, ok)
	}
	for _, tc := range []struct {
		e    locker.Entry
		want string
	}{
		{locker.Entry{Name: "A", Open: open}, `"A"`},
		{locker.Entry{Name: "1a", Open: open}, `"1a"`},
		{locker.Entry{Name: "a b", Open: open}, `"a b"`},
		{locker.Entry{Name: "", Open: open}, `""`},
		{locker.Entry{Name: "a", Open: open}, "taken"},
		{locker.Entry{Name: "c"}, "Open is nil"},
		{locker.Entry{Name: "c", Open: open, Profile: "strong"}, `"strong"`},
		{locker.Entry{Name: "c", Open: open, Decisive: &locker.Decisive{Fault: "pause-client", Property: "safety"}}, `Property "safety"`},
		{locker.Entry{Name: "c", Open: open, Decisive: &locker.Decisive{Property: "lease"}}, `Fault ""`},
		{locker.Entry{Name: "c", Open: open, Needs: locker.Needs{Store: "consul"}}, `Store "consul"`},
		{locker.Entry{Name: "c", Open: open, Needs: locker.Needs{Store: "etcd", Redlock: true}}, "no Redlock"},
	} {
		if err := r.Add(tc.e); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add(%+v) = %v; want ErrInvalid naming %s", tc.e, err, tc.want)
		}
	}
	if _, err := r.Open("nope", locker.Deps{}); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Open(nope) = %v", err)
	}
	if _, err := r.Open("b-2", locker.Deps{}); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "Redlock") {
		t.Errorf("Open of a lock that needs independent masters, without them: %v", err)
	}
	if err := r.Add(locker.Entry{Name: "on-etcd", Open: open, Needs: locker.Needs{Store: "etcd"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		d    locker.Deps
		want string
	}{
		{"on-etcd", locker.Deps{}, "needs the etcd store"},
		{"on-etcd", locker.Deps{Store: locker.Store{Kind: "zookeeper", Endpoints: []string{"x:1"}}}, "needs the etcd store"},
		{"on-etcd", locker.Deps{Store: locker.Store{Kind: "etcd"}}, "Endpoints is empty"},
		{"a", locker.Deps{Store: locker.Store{Kind: "etcd", Endpoints: []string{"x:1"}}}, "runs on Redis"},
	} {
		if _, err := r.Open(tc.name, tc.d); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s, %+v) = %v; want ErrInvalid saying %q", tc.name, tc.d.Store, err, tc.want)
		}
	}
	if _, err := r.Open("on-etcd", locker.Deps{Store: locker.Store{Kind: "etcd", Endpoints: []string{"x:1"}}}); err != nil {
		t.Errorf("Open of a lock on its store: %v", err)
	}
}
