package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/reports"
	"github.com/lockproof/lockproof/zoo"
)

// runPlan runs the small matrix of these tests (3 locks × 2 faults × 2
// seeds) into out, whole (shard nil) or one shard of it.
func runPlan(t testing.TB, out string, shard *contract.Shard) *contract.Summary {
	t.Helper()
	var opened []env.Spec
	var mu sync.Mutex
	fr := &fakeRunner{}
	sum, err := Run(context.Background(), Config{Registry: zoo.Builtin(),
		Locks: []string{"set-del", "lua", "fenced"}, Faults: []string{contract.FaultPauseClient, contract.FaultFailover},
		Seeds: []uint64{1, 2}, Out: out, Open: fakeOpener(&opened, &mu), Runner: fr.run, Shard: shard,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// comparable reads dir's summary.json as JSON with what differs between
// two runs of one plan (wall times, start times) left out.
func comparable(t *testing.T, dir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, contract.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	rows, _ := doc["scenarios"].([]any)
	for _, r := range rows {
		m := r.(map[string]any)
		delete(m, "elapsed_ms")
		delete(m, "started")
	}
	return doc
}

// TestMergedShardsEqualOneRun: a plan run as three shards (each a
// contiguous run of cells, none split) and merged gives the summary and
// the report that running it whole gives; every scenario's files are
// there. Bad merges are refused, naming what is wrong.
func TestMergedShardsEqualOneRun(t *testing.T) {
	whole := t.TempDir()
	runPlan(t, whole, nil)
	var dirs []string
	cells := map[string]int{}
	for k := 3; k >= 1; k-- { // any order
		d := t.TempDir()
		sum := runPlan(t, d, &contract.Shard{Index: k, Count: 3})
		if sum.Shard == nil || sum.Shard.Cells != 6 || sum.Shard.Index != k {
			t.Fatalf("shard %d/3 records %+v; want its place in a plan of 6 cells", k, sum.Shard)
		}
		for _, c := range sum.Cells {
			cells[c.Lock+" "+c.Fault]++
		}
		dirs = append(dirs, d)
	}
	for c, n := range cells {
		if n != 1 {
			t.Fatalf("cell %s in %d shards; want one (a cell is never split)", c, n)
		}
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if _, err := Merge(merged, dirs, false); err != nil {
		t.Fatal(err)
	}
	if a, b := comparable(t, whole), comparable(t, merged); !reflect.DeepEqual(a, b) {
		ja, _ := json.MarshalIndent(a, "", " ")
		jb, _ := json.MarshalIndent(b, "", " ")
		t.Fatalf("merged summary differs from the whole run's:\nwhole:\n%s\nmerged:\n%s", ja, jb)
	}
	wr, err := reports.Load(whole)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := reports.Load(merged)
	if err != nil {
		t.Fatal(err)
	}
	wrep, mrep := reports.Build(wr), reports.Build(mr)
	if wrep.Status != mrep.Status || wrep.Headline != mrep.Headline {
		t.Fatalf("report: whole %s %q, merged %s %q", wrep.Status, wrep.Headline, mrep.Status, mrep.Headline)
	}
	for _, sc := range mr.Scenarios {
		if len(sc.Problems) > 0 {
			t.Errorf("merged scenario %s: %v", sc.ID, sc.Problems)
		}
	}
	if _, err := os.Stat(filepath.Join(merged, contract.MarkdownFile)); err != nil {
		t.Errorf("no report in the merged directory: %v", err)
	}

	for name, bad := range map[string][]string{
		"a shard missing":    dirs[:2],
		"a shard twice":      {dirs[0], dirs[0], dirs[1]},
		"not a shard":        {whole, dirs[1], dirs[2]},
		"into a shard's own": dirs,
	} {
		out := filepath.Join(t.TempDir(), "m")
		if name == "into a shard's own" {
			out = dirs[0]
		}
		if _, err := Merge(out, bad, true); !errors.Is(err, ErrBadMerge) {
			t.Errorf("%s: %v; want ErrBadMerge", name, err)
		}
	}
	if _, err := Merge(merged, dirs, true); !errors.Is(err, ErrBadMerge) {
		t.Errorf("merge into a non-empty directory: %v; want ErrBadMerge", err)
	}
	if _, err := Run(context.Background(), Config{Registry: zoo.Builtin(), Locks: []string{"fenced"}, Faults: []string{contract.FaultPauseClient}, Seeds: []uint64{1},
		Out: t.TempDir(), Open: fakeOpener(new([]env.Spec), new(sync.Mutex)), Runner: (&fakeRunner{}).run, Shard: &contract.Shard{Index: 1, Count: 2}}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("an empty shard: %v; want ErrBadConfig", err)
	}
}

func TestParseShard(t *testing.T) {
	for in, ok := range map[string]bool{"1/1": true, "2/4": true, "4/4": true, "0/4": false, "5/4": false, "1": false, "a/b": false, "1/0": false, "-1/2": false} {
		sh, err := contract.ParseShard(in)
		if (err == nil) != ok {
			t.Errorf("ParseShard(%q) = %v, %v; want ok %v", in, sh, err, ok)
		}
		if ok && sh.String() != in {
			t.Errorf("ParseShard(%q).String() = %q", in, sh.String())
		}
	}
	// Ranges cover every cell once, in order.
	for n := 1; n <= 7; n++ {
		next := 0
		for k := 1; k <= n; k++ {
			lo, hi := contract.Shard{Index: k, Count: n}.Range(10)
			if lo != next || hi < lo {
				t.Fatalf("%d/%d of 10 cells: [%d, %d), want from %d", k, n, lo, hi, next)
			}
			next = hi
		}
		if next != 10 {
			t.Fatalf("%d shards cover %d of 10 cells", n, next)
		}
	}
}

// TestFreshEnvironmentFromTheLocksNeeds: a fresh environment (failover)
// has the independent masters a lock needs by its locker.Entry, whatever
// the lock is called: a user's Redlock under another name gets them too
// (chaos.FreshSpec once looked for the name "redlock").
func TestFreshEnvironmentFromTheLocksNeeds(t *testing.T) {
	reg := zoo.Builtin()
	redlock, _ := reg.Lookup(zoo.RedlockName)
	mine := redlock
	mine.Name = "my-redlock"
	if err := reg.Add(mine); err != nil {
		t.Fatal(err)
	}
	var opened []env.Spec
	var mu sync.Mutex
	if _, err := Run(context.Background(), Config{Locks: []string{"my-redlock", "lua"}, Faults: []string{contract.FaultFailover},
		Seeds: []uint64{1}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: (&fakeRunner{}).run, Registry: reg, NoReport: true}); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 2 || opened[0].Redlock != 3 || opened[1].Redlock != 0 {
		t.Fatalf("fresh environments %+v; want 3 masters for my-redlock (Needs.Redlock), none for lua", opened)
	}
}

// TestMergeRefusesLinksInAShard: a shard whose scenario directory is a
// symbolic link (to ~/.ssh, say), or that holds a link among a scenario's
// files, is refused with an error naming the link; nothing behind the
// link reaches the merged directory (issue 62.2: os.CopyFS followed the
// link at the root of what it copied).
func TestMergeRefusesLinksInAShard(t *testing.T) {
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "id_ed25519"), []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"scenario directory", "file in a scenario", "summary.json"} {
		t.Run(how, func(t *testing.T) {
			var dirs []string
			for k := 1; k <= 2; k++ {
				d := t.TempDir()
				runPlan(t, d, &contract.Shard{Index: k, Count: 2})
				dirs = append(dirs, d)
			}
			sum, err := ReadSummary(dirs[1])
			if err != nil {
				t.Fatal(err)
			}
			id := sum.Scenarios[0].ID()
			link := filepath.Join(dirs[1], id)
			switch how {
			case "scenario directory":
				if err := os.RemoveAll(link); err != nil {
					t.Fatal(err)
				}
			case "summary.json":
				link = filepath.Join(dirs[1], contract.SummaryFile)
				moved := filepath.Join(secret, contract.SummaryFile)
				if err := os.Rename(link, moved); err != nil {
					t.Fatal(err)
				}
			default:
				link = filepath.Join(link, "stolen")
			}
			target := secret
			switch how {
			case "file in a scenario":
				target = filepath.Join(secret, "id_ed25519")
			case "summary.json":
				target = filepath.Join(secret, contract.SummaryFile)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "merged")
			_, err = Merge(out, dirs, true)
			if !errors.Is(err, ErrBadMerge) || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "link") {
				t.Errorf("merge of a shard with a link at %s: %v; want ErrBadMerge naming the link", link, err)
			}
			_ = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if b, _ := os.ReadFile(p); strings.Contains(string(b), "PRIVATE KEY") {
						t.Errorf("%s: the secret behind the link was copied into the merged directory", p)
					}
				}
				return nil
			})
		})
	}
}
