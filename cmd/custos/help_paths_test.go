package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// etcConfig matches a configuration file under /etc/custos.
var etcConfig = regexp.MustCompile(`/etc/custos/[A-Za-z0-9._-]+\.ya?ml`)

// TestHelpNamesTheInstalledConfigFile: every --help and document that
// names the serve configuration file under /etc/custos names the one the
// shipped systemd unit passes to 'custos serve --config'
// (deploy/systemd/custos.service), which docs/operations.md installs. config check's and compliance report's
// examples named /etc/custos/config.yaml, a file no install writes.
func TestHelpNamesTheInstalledConfigFile(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/custos.service")
	if err != nil {
		t.Fatal(err)
	}
	installed := etcConfig.FindAllString(string(unit), -1)
	if len(installed) != 1 {
		t.Fatalf("deploy/systemd/custos.service names %q, want one /etc/custos configuration file", installed)
	}
	want := installed[0]
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	named := 0
	eachCommand(root, func(cmd *cobra.Command) {
		for _, p := range etcConfig.FindAllString(cmd.Long+"\n"+cmd.Example, -1) {
			named++
			if p != want {
				t.Errorf("%s --help names %s; the systemd unit reads %s", cmd.CommandPath(), p, want)
			}
		}
	})
	if named == 0 {
		t.Fatal("no --help names an /etc/custos configuration file: is the walk broken?")
	}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range etcConfig.FindAllString(string(b), -1) {
			if p != want {
				t.Errorf("%s names %s; the systemd unit reads %s", strings.TrimPrefix(f, "../../"), p, want)
			}
		}
	}
}
