package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// The CLI is tested by running the real command from testscript files in
// testdata/script/*.txtar (as age does for cmd/age).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"custos": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script", RequireExplicitExec: false})
}
