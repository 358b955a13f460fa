package locker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/locker"
)

// TestStoreNeverPrintsItsPassword: a Store formatted into an error or a
// log (any verb) names its login, never its password.
func TestStoreNeverPrintsItsPassword(t *testing.T) {
	const pw = "store-pw-91ce"
	s := locker.Store{Kind: "etcd", Endpoints: []string{"127.0.0.1:2379"}, Username: "root", Password: pw}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, s)
		if strings.Contains(out, pw) || !strings.Contains(out, `user "root" with a password`) {
			t.Errorf("%s: %s; want the user, and the password not shown", verb, out)
		}
	}
	if out := fmt.Sprintf("%v", locker.Deps{Store: s}); strings.Contains(out, pw) {
		t.Errorf("Deps: %s prints the store's password", out)
	}
}
