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

// TestEveryCommandHelpTeaches walks the command tree, so a command added
// later is covered too: the --help of every command that does something
// (not a group, not cobra's completion and help) says what it does and
// shows at least one example invocation of itself.
func TestEveryCommandHelpTeaches(t *testing.T) {
	eachCommandHelp(t, func(c *cobra.Command, help string) {
		if strings.TrimSpace(c.Long) == "" {
			t.Errorf("%s --help says only %q: no description", c.CommandPath(), c.Short)
		}
		i := strings.Index(help, "\nExample")
		if i < 0 || !strings.Contains(help[i:], "  "+c.CommandPath()) {
			t.Errorf("%s --help shows no example of '%s ...'", c.CommandPath(), c.CommandPath())
		}
	})
}

// eachCommandHelp runs the --help of every command that does something
// (not a group, not cobra's completion and help), walking the command tree
// so that a command added later is covered too, and calls check with the
// command and its help.
func eachCommandHelp(t *testing.T, check func(c *cobra.Command, help string)) {
	t.Helper()
	n := 0
	eachCommand(newRootCmd(new(bytes.Buffer), new(bytes.Buffer)), func(c *cobra.Command) {
		if c.HasAvailableSubCommands() || !c.IsAvailableCommand() || c.Name() == "help" ||
			(c.HasParent() && c.Parent().Name() == "completion") || c.Name() == "completion" {
			return
		}
		n++
		path := strings.Fields(c.CommandPath())[1:]
		var out, errb bytes.Buffer
		if code := run(append(path[:len(path):len(path)], "--help"), &out, &errb); code != 0 {
			t.Errorf("%s --help: exit %d\n%s", c.CommandPath(), code, errb.String())
			return
		}
		check(c, out.String())
	})
	if n < 25 {
		t.Fatalf("checked %d commands, want at least 25", n)
	}
}

// TestRequiredFlagsAreMarked: the --help of each command marks the flags
// it cannot run without as required (the usage line shows them too, but
// the flag table is where a reader looks up a flag).
func TestRequiredFlagsAreMarked(t *testing.T) {
	required := map[string][]string{
		"audit export":      {"data-dir", "purpose"},
		"audit hash":        {"data-dir", "purpose"},
		"audit prove":       {"data-dir", "purpose", "seq"},
		"audit pubkey":      {"data-dir"},
		"audit report":      {"data-dir", "purpose"},
		"backup":            {"data-dir", "out", "purpose"},
		"btg grant":         {"data-dir", "sub", "patient", "reason"},
		"btg list":          {"data-dir"},
		"btg review":        {"data-dir"},
		"btg revoke":        {"data-dir", "grant", "reason"},
		"compliance report": {"data-dir", "out", "purpose"},
		"import":            {"data-dir"},
		"policy bundle":     {"output", "sequence"},
		"policy eval":       {"input"},
		"policy impact":     {"candidate", "data-dir", "purpose"},
		"policy sign":       {"output"},
		"policy verify":     {"key"},
		"restore":           {"from", "data-dir"},
		"seed":              {"out", "patients"},
		"store reencrypt":   {"data-dir"},
		"sync":              {"fhir-base", "data-dir"},
		"token new":         {"principal", "tokens"},
	}
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	for path, flags := range required {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.CommandPath() != "custos "+path {
			t.Errorf("custos %s: no such command (%v)", path, err)
			continue
		}
		for _, name := range flags {
			f := cmd.Flags().Lookup(name)
			if f == nil {
				t.Errorf("custos %s: no flag --%s", path, name)
			} else if !strings.Contains(f.Usage, "required") {
				t.Errorf("custos %s --help: --%s %q does not say it is required", path, name, f.Usage)
			}
		}
	}
}

// TestExportToSeqDefaultIsTheLatestCheckpoint: 'audit export --help' said
// --to-seq defaults to "the head", while a bundle without it ends at the
// latest signed checkpoint (its Long text, access.BundleRequest): the
// command's own access record, the head, is never in it. Found by
// h-review52 reading the help beside a bundle of records 1..19 of a log
// whose head was 20.
func TestExportToSeqDefaultIsTheLatestCheckpoint(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	cmd, _, err := root.Find([]string{"audit", "export"})
	if err != nil {
		t.Fatal(err)
	}
	u := cmd.Flags().Lookup("to-seq").Usage
	if strings.Contains(u, "the head") || !strings.Contains(u, "latest signed checkpoint") {
		t.Errorf("audit export --to-seq: %q, want the default named as the latest signed checkpoint", u)
	}
}

// TestEveryCommandStatesItsExitStatus walks the command tree: the --help of
// every command that does something (not a group, not cobra's completion
// and help) states its exit status, its own or the root help's rule for
// every command, so a script's author need not guess. Before, 20 of them
// said nothing (22 of them: audit hash, btg grant, serve, ...), or only part of it
// (audit prove: "refused (exit 2)").
func TestEveryCommandStatesItsExitStatus(t *testing.T) {
	eachCommandHelp(t, func(c *cobra.Command, help string) {
		i := strings.Index(strings.ToLower(help), "exit status")
		if i < 0 {
			t.Errorf("%s --help does not state its exit status", c.CommandPath())
			return
		}
		for _, code := range []string{"0", "1", "2"} {
			if !strings.Contains(help[i:], code) {
				t.Errorf("%s --help: its exit status names no %s:\n%s", c.CommandPath(), code, help[i:])
			}
		}
	})
}
