package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docInvocation is one "custos ..." command written in a document.
type docInvocation struct {
	file   string
	line   int
	args   []string
	fenced bool // in a fenced code block: a command to type as it stands
}

// codeSpan matches an inline Markdown code span.
var codeSpan = regexp.MustCompile("`[^`\n]+`")

// docInvocations returns every custos command line written in the
// README, SECURITY.md and docs/*.md: in fenced code blocks (a line ending
// in a backslash continues on the next) and in inline code spans. The
// words after "custos" stop at the end of the shell command (a comment,
// a pipe, &&, ;, a redirection, a closing parenthesis).
func docInvocations(t *testing.T) []docInvocation {
	t.Helper()
	var out []docInvocation
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		lines := strings.Split(string(b), "\n")
		fenced := false
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				l = shellCode(l)
				start := i
				for strings.HasSuffix(strings.TrimRight(l, " "), "\\") && i+1 < len(lines) {
					i++
					l = strings.TrimSuffix(strings.TrimRight(l, " "), "\\") + " " + shellCode(lines[i])
				}
				for _, inv := range invocationsIn(name, start+1, l) {
					inv.fenced = true
					out = append(out, inv)
				}
				continue
			}
			for _, span := range codeSpan.FindAllString(l, -1) {
				out = append(out, invocationsIn(name, i+1, strings.Trim(span, "`"))...)
			}
		}
	}
	return out
}

// docFiles are the documents, as paths from this package: docs/*.md, the
// README and SECURITY.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, "../../README.md", "../../SECURITY.md")
}

// shellCode is a line of a code block without its shell comment.
func shellCode(l string) string {
	if strings.HasPrefix(strings.TrimSpace(l), "#") {
		return ""
	}
	if i := strings.Index(l, " #"); i >= 0 {
		return l[:i]
	}
	return l
}

// invocationsIn finds the custos commands in one line of shell text.
func invocationsIn(file string, line int, text string) []docInvocation {
	words := strings.Fields(text)
	var out []docInvocation
	for i, w := range words {
		if w != "custos" && !strings.HasSuffix(w, "/custos") || i+1 == len(words) {
			continue
		}
		var args []string
		for _, a := range words[i+1:] {
			if a == "#" || strings.HasPrefix(a, "#") || a == "|" || a == `\|` || a == "&&" || a == ";" || a == "||" ||
				strings.HasPrefix(a, ">") || strings.HasPrefix(a, "2>") || strings.HasPrefix(a, ")") {
				break
			}
			args = append(args, strings.TrimRight(a, ";)"))
		}
		out = append(out, docInvocation{file: file, line: line, args: args})
	}
	return out
}

// TestDocumentedFlagsExist: every flag a document gives a custos command
// is one that command takes, so a reader who types the documented command
// is not told "unknown flag". A command whose subcommand is not a custos
// command (prose such as "custos is one software component") is skipped.
func TestDocumentedFlagsExist(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	checked := 0
	for _, inv := range docInvocations(t) {
		if len(inv.args) == 0 || strings.HasPrefix(inv.args[0], "-") {
			continue
		}
		cmd, rest, err := root.Find(inv.args)
		if err != nil || cmd == root {
			continue
		}
		_ = rest
		checked++
		for _, a := range inv.args {
			name, ok := flagName(a)
			if !ok {
				continue
			}
			if lookupFlag(cmd, name) == nil {
				t.Errorf("%s:%d: custos %s: %s takes no flag %s", inv.file, inv.line, strings.Join(inv.args, " "), cmd.CommandPath(), a)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d documented custos commands, want at least 100: is the scan broken?", checked)
	}
}

// flagName is the name of the flag a documented word gives ("--out" or
// "--out=DIR": "out"; "-o": "o"), or false for any other word.
func flagName(word string) (string, bool) {
	if !strings.HasPrefix(word, "-") || word == "-" || word == "--" {
		return "", false
	}
	name := strings.TrimLeft(word, "-")
	name, _, _ = strings.Cut(name, "=")
	name = strings.TrimRight(name, ",.:")
	if name == "" || strings.ContainsAny(name, "…/[]|()'\"`") || strings.HasPrefix(name, "-") {
		return "", false
	}
	return name, true
}

func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if len(name) == 1 {
		if f := cmd.Flags().ShorthandLookup(name); f != nil {
			return f
		}
		if f := cmd.InheritedFlags().ShorthandLookup(name); f != nil {
			return f
		}
		return nil
	}
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	if f := cmd.InheritedFlags().Lookup(name); f != nil {
		return f
	}
	return nil
}

// requiredUsage matches the --help text of a flag that is always required
// (markRequired's "(required)", or "(required; ...)"), not one required
// only with another ("required with --bundle").
var requiredUsage = regexp.MustCompile(`\(required[;)]`)

// TestDocumentedCommandsHaveTheirRequiredFlags: a command written in a
// fenced code block is one to type as it stands, so it gives every flag
// its command requires (or --config, --help). Inline code spans are not
// held to it: prose names a command by its distinguishing flags
// ("`custos audit report --break-glass`"), and over 300 spans do.
func TestDocumentedCommandsHaveTheirRequiredFlags(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	checked := 0
	for _, inv := range docInvocations(t) {
		if !inv.fenced || len(inv.args) == 0 || strings.HasPrefix(inv.args[0], "-") {
			continue
		}
		cmd, _, err := root.Find(inv.args)
		if err != nil || cmd == root || cmd.HasAvailableSubCommands() {
			continue
		}
		given := map[string]bool{}
		for _, a := range inv.args {
			if name, ok := flagName(a); ok {
				if f := lookupFlag(cmd, name); f != nil {
					given[f.Name] = true
				}
			}
		}
		if given["config"] || given["help"] || given["print-jwks"] { // no run: flags from a file, help, the sync client's public key
			continue
		}
		checked++
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if requiredUsage.MatchString(f.Usage) && !given[f.Name] {
				t.Errorf("%s:%d: custos %s: without --%s, which %s requires", inv.file, inv.line, strings.Join(inv.args, " "), f.Name, cmd.CommandPath())
			}
		})
	}
	if checked < 50 {
		t.Fatalf("checked %d documented custos commands, want at least 50: is the scan broken?", checked)
	}
}
