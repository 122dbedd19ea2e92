package main

import (
	"bytes"
	"strings"
	"testing"
)

func racetests(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(args, &out)
	return out.String(), err
}

// The selection on testdata/ok: goroutines started by the test, through
// helper functions and methods, t.Parallel and the directive select a test;
// a sequential test (recursive helpers included) and excluded directories do
// not.
func TestSelection(t *testing.T) {
	const root = "testdata/ok"
	list, err := racetests(t, "-root", root, "-exclude", "skipped", "list")
	if err != nil {
		t.Fatal(err)
	}
	want := `./a	TestDirective	//custos:race
./a	TestGoStatement	go statement in TestGoStatement
./a	TestMethodHelper	go statement in run
./a	TestParallel	Parallel call in TestParallel
./a	TestThroughHelpers	Go call in inner
`
	if list != want {
		t.Errorf("list:\n%s\nwant:\n%s", list, want)
	}
	const re = "^(TestDirective|TestGoStatement|TestMethodHelper|TestParallel|TestThroughHelpers)$"
	for mode, want := range map[string]string{
		"run":  "-run=" + re + " ./a\n",
		"skip": "-skip=" + re + "\n",
	} {
		got, err := racetests(t, "-root", root, "-exclude", "skipped/", mode)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", mode, got, err, want)
		}
	}
	// Not excluded, skipped/ has a concurrent test of its own.
	got, err := racetests(t, "-root", root, "run")
	if err != nil || !strings.HasSuffix(got, "|TestSkippedGoStatement|TestThroughHelpers)$ ./a ./skipped\n") {
		t.Errorf("run without -exclude = %q, %v; want TestSkippedGoStatement and ./skipped", got, err)
	}
}

// testdata/bad breaks both rules: a package starts a goroutine that no test
// drives under -race, and a concurrent test's name is the name of a test
// that does not run under -race in another package (excluded ones too).
func TestRulesFail(t *testing.T) {
	out, err := racetests(t, "-root", "testdata/bad", "-exclude", "e", "run")
	if err == nil {
		t.Fatalf("no error; printed %q", out)
	}
	for _, want := range []string{
		"./c starts a goroutine (c.go:4) but none of its tests runs under -race",
		"TestStart runs under -race in ./d, so `make unit` would skip ./c's TestStart too",
		"TestStart runs under -race in ./d, so `make unit` would skip ./e's TestStart too",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := racetests(t, "-root", "testdata/bad", "-exclude", "c,d,e", "run"); err == nil || !strings.Contains(err.Error(), "no test with concurrency") {
		t.Errorf("nothing selected: err = %v", err)
	}
	if _, err := racetests(t, "-root", "testdata/ok", "bogus"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("bad mode: err = %v", err)
	}
}
