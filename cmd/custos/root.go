package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/store"
)

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if isCheck(cmd) {
		err = verdictExit(err)
	}
	if err != nil {
		var ee exitError
		if !errors.As(err, &ee) || ee.err != nil {
			printErr(stderr, err)
		}
		var ue usageError
		if errors.As(err, &ue) {
			// Bad usage only: a check's "could not check" is exit 2 too
			// (verdictExit), and a usage hint would mislead there.
			if cmd == nil {
				cmd = root
			}
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return exitCode(err)
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "custos",
		Short: "MCP resources server for protected health information",
		Long: `custos serves health records, notes, reports and images to AI assistants as
read-only MCP resources. Every resources/list and resources/read passes an OPA
Rego policy decision, then an append-only, hash-chained audit record durably
committed to disk, and only then is the payload fetched and minimized as the
decision demands.

Getting started:
  custos demo                                   seed, serve and exercise a demo data set
  custos seed --out ./synthetic --patients 50   generate synthetic FHIR data
  custos import --data-dir ./data ./synthetic   load it into a data directory
  custos serve --dev --data-dir ./data --stdio  serve it to a desktop assistant
  custos audit verify --data-dir ./data         check the audit hash chain

A data directory holds catalog.db (resources and blobs) and audit.db (the
audit log). Only one process may open it for writing at a time.

Exit status:
  checks (audit verify, config check, policy test, policy check, policy
  verify): 0 passed, 1 problems found (each printed), 2 no verdict (bad
  usage, or input that cannot be read: nothing was checked)
  every other command: 0 done, 1 failed (the error says why), 2 bad usage`,
		Version:       formatVersion(readBuildVersion()),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// A group parses its own flags before it looks at the subcommand, so
		// in 'custos audit verfy --data-dir D' the flag looks unknown; the
		// mistake to report is the subcommand.
		if cmd.HasAvailableSubCommands() && cmd.Args != nil {
			if aerr := cmd.Args(cmd, cmd.Flags().Args()); aerr != nil {
				return aerr
			}
		}
		return usageError{err}
	})
	commandGroup(root,
		newServeCmd(),
		newSeedCmd(),
		newImportCmd(),
		newSyncCmd(),
		newAuditCmd(),
		newBackupCmd(), newRestoreCmd(),
		newTokenCmd(),
		newDemoCmd(),
		newStoreCmd(),
		newPolicyCmd(),
		newBtgCmd(),
		newComplianceCmd(),
		newConfigCmd(),
		newVersionCmd(),
	)
	argsAreUsage(root)
	stateExitStatus(root)
	return root
}

// exitStatusRule is the exit status of every command that is not a check,
// as the root help gives it.
const exitStatusRule = `Exit status (the rule of every command that is not a check: 'custos
--help'): 0 done, 1 failed (the error says why), 2 bad usage.`

// stateExitStatus gives the help of every command below cmd that does not
// state its own exit status the root help's rule (before its examples),
// so that each command's --help says what its exit status means.
func stateExitStatus(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		stateExitStatus(c)
	}
	if !cmd.HasParent() || cmd.HasSubCommands() || strings.Contains(strings.ToLower(cmd.Long), "exit status") {
		return
	}
	if i := strings.Index(cmd.Long, "\n\nExample"); i >= 0 {
		cmd.Long = cmd.Long[:i] + "\n\n" + exitStatusRule + cmd.Long[i:]
		return
	}
	cmd.Long = strings.TrimRight(cmd.Long, "\n") + "\n\n" + exitStatusRule
}

// argsAreUsage makes a wrong number or kind of positional arguments bad
// usage (exit 2) in cmd and every command below it: cobra's own checks
// (cobra.NoArgs, cobra.ExactArgs, ...) return plain errors, which would
// exit 1 like a failed operation.
func argsAreUsage(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ue usageError
			if err != nil && !errors.As(err, &ue) {
				return usageError{err}
			}
			return err
		}
	}
	for _, c := range cmd.Commands() {
		argsAreUsage(c)
	}
}

// commandGroup makes cmd the group of the subcommands subs, and returns it.
// Cobra answers a group that has no Run of its own by printing its help and
// exiting 0, even for a typo ('custos audit verfy'), so a script never
// learns that nothing ran. A group made here fails instead as bad usage
// (exit 2), naming the unknown subcommand and listing the valid ones; run
// without a subcommand it fails the same way, except the root command, which
// shows its help.
func commandGroup(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.AddCommand(subs...)
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return usagef("unknown subcommand %q for %q%s; valid subcommands: %s",
			args[0], cmd.CommandPath(), didYouMean(cmd, args[0]), subcommandNames(cmd))
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.HasParent() {
			return cmd.Help()
		}
		return usagef("%q needs a subcommand: %s", cmd.CommandPath(), subcommandNames(cmd))
	}
	return cmd
}

// subcommandNames lists the subcommands of cmd that --help shows.
func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// didYouMean suggests the subcommands of cmd closest to typed (cobra's
// Levenshtein and prefix matching), or returns "".
func didYouMean(cmd *cobra.Command, typed string) string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	var quoted []string
	for _, s := range cmd.SuggestionsFor(typed) {
		quoted = append(quoted, strconv.Quote(s))
	}
	if len(quoted) == 0 {
		return ""
	}
	return " (did you mean " + strings.Join(quoted, " or ") + "?)"
}

// dataDir names the files of a data directory.
type dataDir string

func (d dataDir) catalog() string { return filepath.Join(string(d), "catalog.db") }
func (d dataDir) audit() string   { return filepath.Join(string(d), "audit.db") }

func requireDataDir(dir string) (dataDir, error) {
	if strings.TrimSpace(dir) == "" {
		return "", usagef("--data-dir is required")
	}
	return dataDir(dir), nil
}

// existingDataDir checks that dir exists and holds file (catalog.db or audit.db).
func existingFile(path, what string) error {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s not found at %s (is --data-dir right?)", what, path)
		}
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s at %s is a directory", what, path)
	}
	return nil
}

// requireExistingDataDir is requireDataDir, then existingDir.
func requireExistingDataDir(dir string) (dataDir, error) {
	d, err := requireDataDir(dir)
	if err != nil {
		return "", err
	}
	return d, existingDir(d)
}

// existingDir checks that the data directory d exists, for commands that
// read a file in it that may rightly be missing (grants.db before the
// first grant): a mistyped --data-dir must not read as "nothing there".
func existingDir(d dataDir) error {
	st, err := os.Stat(string(d))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("data directory %s not found (is --data-dir right?)", d)
	case err != nil:
		return fmt.Errorf("--data-dir %s: %w", d, err)
	case !st.IsDir():
		return usagef("--data-dir %s is a file, not a directory", d)
	}
	return nil
}

// markRequired says "(required)" in the --help of cmd's flags names (each
// must exist), unless their help says so already. The checks stay in each
// RunE, which names what is missing in its own words and exits 2
// (cobra's MarkFlagRequired would do neither).
func markRequired(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		if f == nil {
			panic("markRequired: " + cmd.CommandPath() + " has no flag --" + n)
		}
		if !strings.Contains(f.Usage, "required") {
			f.Usage += " (required)"
		}
	}
}

// checkOutputFile refuses, before any work is done or recorded, a FILE
// given to flag (-o) that could never be written: a directory, or a file in
// a directory that does not exist.
func checkOutputFile(flag, path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef("%s %s is a directory: give a file name", flag, path)
	}
	return checkParentDir(flag, path)
}

// checkParentDir refuses a path given to flag whose directory does not
// exist, is not a directory, or is one this account cannot create files
// in (every output is written beside its name, then renamed): refused
// after the fact, a backup or export had already appended its access
// record.
func checkParentDir(flag, path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return usagef("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	case !st.IsDir():
		return usagef("%s %s: %s is not a directory", flag, path, dir)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return usagef("%s %s: directory %s is not writable by this account (uid %d): %v", flag, path, dir, os.Geteuid(), err)
	}
	return nil
}

// lockHint explains a lock timeout: bbolt allows one writer per file, and
// the usual holder is a running server.
func lockHint(err error) error {
	if errors.Is(err, audit.ErrLocked) || errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w: another custos process (usually 'custos serve') holds this data directory; stop it, or work on a copy of the file", err)
	}
	return err
}
