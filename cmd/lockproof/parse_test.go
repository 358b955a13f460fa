package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/runner"
	"github.com/lockproof/lockproof/zoo"
)

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint64
	}{
		{"1-10", []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"1,2,5", []uint64{1, 2, 5}},
		{"7", []uint64{7}},
		{" 3-4 , 9 ", []uint64{3, 4, 9}},
		{"0-0", []uint64{0}},
	} {
		got, err := parseSeeds(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseSeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "a", "1-", "-3", "5-2", "1,1", "1-3,2", "1-100000", "1.5", "1;2"} {
		if got, err := parseSeeds(in); !errors.Is(err, runner.ErrBadConfig) {
			t.Errorf("parseSeeds(%q) = %v, %v; want runner.ErrBadConfig", in, got, err)
		}
	}
}

func TestParseNames(t *testing.T) {
	got, err := parseNames("--locks", "lua,fenced", zoo.Builtin().Names())
	if err != nil || !slices.Equal(got, []string{"lua", "fenced"}) {
		t.Fatalf("parseNames = %v, %v", got, err)
	}
	if got, err := parseNames("--locks", "all", zoo.Builtin().Names()); err != nil || !slices.Equal(got, zoo.Builtin().Names()) {
		t.Fatalf("parseNames(all) = %v, %v", got, err)
	}
	_, err = parseNames("--locks", "lua,nope", zoo.Builtin().Names())
	if !errors.Is(err, runner.ErrBadConfig) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "--locks") {
		t.Fatalf("unknown name: err = %v; want runner.ErrBadConfig naming the flag and the name", err)
	}
}

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"python3 adapter.py", []string{"python3", "adapter.py"}},
		{"  java  -jar 'my lock.jar'\t--ttl=1 ", []string{"java", "-jar", "my lock.jar", "--ttl=1"}},
		{`node "a \"b\" c" d\ e ''`, []string{"node", `a "b" c`, "d e", ""}},
		{`sh -c 'echo $HOME'`, []string{"sh", "-c", "echo $HOME"}},
		{`x "a\nb"`, []string{"x", `a\nb`}},
	} {
		got, err := splitCommand(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "   ", `a "b`, "a 'b", `a \`} {
		if got, err := splitCommand(in); err == nil {
			t.Errorf("splitCommand(%q) = %q; want an error", in, got)
		}
	}
}
