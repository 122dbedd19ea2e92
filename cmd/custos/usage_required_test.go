package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestUsageLineNamesRequiredFlags: the usage line of a command's --help
// ("custos audit prove --data-dir D --seq N") is what a reader types, so
// it names every flag the command always requires (marked "(required)" in
// the flag list, as TestDocumentedCommandsHaveTheirRequiredFlags reads
// it). A usage line without --purpose sent a reader who typed it to
// "a purpose of use is required".
func TestUsageLineNamesRequiredFlags(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	checked := 0
	eachCommand(root, func(cmd *cobra.Command) {
		if cmd.HasAvailableSubCommands() || !cmd.IsAvailableCommand() && cmd != root {
			return
		}
		checked++
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			named := strings.Contains(cmd.Use, "--"+f.Name) || f.Shorthand != "" && strings.Contains(cmd.Use, "-"+f.Shorthand+" ")
			if requiredUsage.MatchString(f.Usage) && !named {
				t.Errorf("%s: usage line %q does not name --%s, which the command requires", cmd.CommandPath(), cmd.Use, f.Name)
			}
		})
	})
	if checked < 30 {
		t.Fatalf("checked %d commands, want at least 30: is the walk broken?", checked)
	}
}

// eachCommand calls f for cmd and every command below it.
func eachCommand(cmd *cobra.Command, f func(*cobra.Command)) {
	for _, c := range cmd.Commands() {
		eachCommand(c, f)
	}
	f(cmd)
}

// TestEveryCommandHasAnExample: the README promises that every command's
// --help has examples; a reader learns a command from one it can type.
// 'custos btg --help' had none.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	eachCommand(root, func(cmd *cobra.Command) {
		if cmd == root || !cmd.IsAvailableCommand() || cmd.Name() == "completion" || cmd.Parent().Name() == "completion" {
			return
		}
		if cmd.Example == "" && !strings.Contains(cmd.Long, "Example") {
			t.Errorf("%s --help has no example", cmd.CommandPath())
		}
	})
}

// TestFlagDefaultShownOnce: cobra appends "(default V)" to a flag's help
// when its default is not the zero value, so a usage text that gives the
// default itself shows two (compliance report's --audit-retention read
// "(default six years) (default 52596h0m0s)").
func TestFlagDefaultShownOnce(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	eachCommand(root, func(cmd *cobra.Command) {
		if !cmd.IsAvailableCommand() {
			return
		}
		usage := cmd.LocalFlags().FlagUsages()
		for _, l := range strings.Split(usage, "\n") {
			if strings.Count(l, "(default ") > 1 {
				t.Errorf("%s: %s", cmd.CommandPath(), strings.TrimSpace(l))
			}
		}
	})
}
