package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryGroupRejectsUnknownSubcommands walks the whole command tree, so a
// group added later is covered too: given an unknown subcommand, or none, a
// group exits 2 and names every valid subcommand.
func TestEveryGroupRejectsUnknownSubcommands(t *testing.T) {
	var groups []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasAvailableSubCommands() {
			groups = append(groups, c)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd(new(bytes.Buffer), new(bytes.Buffer)))
	if len(groups) < 7 { // custos, audit, token, policy, btg, store, config
		t.Fatalf("found %d command groups, want at least 7", len(groups))
	}
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		calls := [][]string{append(path[:len(path):len(path)], "nosuchsubcommand")}
		if g.HasParent() { // the root command shows its help when run bare
			calls = append(calls, path)
		}
		for _, args := range calls {
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			if code != 2 {
				t.Errorf("custos %s: exit %d, want 2 (bad usage)\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errb.String())
				continue
			}
			msg := errb.String()
			if strings.HasSuffix(strings.Join(args, " "), "nosuchsubcommand") && !strings.Contains(msg, `"nosuchsubcommand"`) {
				t.Errorf("custos %s: the error does not name the unknown subcommand:\n%s", strings.Join(args, " "), msg)
			}
			for _, s := range g.Commands() {
				if s.IsAvailableCommand() && !strings.Contains(msg, s.Name()) {
					t.Errorf("custos %s: the error does not list subcommand %q:\n%s", strings.Join(args, " "), s.Name(), msg)
				}
			}
			if !strings.Contains(msg, "Run '"+g.CommandPath()+" --help' for usage.") {
				t.Errorf("custos %s: no usage hint for %s:\n%s", strings.Join(args, " "), g.CommandPath(), msg)
			}
			if out.Len() != 0 {
				t.Errorf("custos %s wrote to stdout:\n%s", strings.Join(args, " "), out.String())
			}
		}
	}
}
