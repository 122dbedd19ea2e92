package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var ee exitError
		if !errors.As(err, &ee) || ee.err != nil {
			printErr(stderr, err)
		}
		if exitCode(err) == 2 {
			fmt.Fprintln(stderr, "Run 'custos --help' for usage.")
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
audit log). Only one process may open it for writing at a time.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newServeCmd(),
		newSeedCmd(),
		newImportCmd(),
		newAuditCmd(),
		newTokenCmd(),
		newDemoCmd(),
		newStoreCmd(),
		newPolicyCmd(),
		newBtgCmd(),
		newConfigCmd(),
	)
	return root
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

// lockHint explains a lock timeout: bbolt allows one writer per file, and
// the usual holder is a running server.
func lockHint(err error) error {
	if errors.Is(err, audit.ErrLocked) || errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w: another custos process (usually 'custos serve') holds this data directory; stop it, or work on a copy of the file", err)
	}
	return err
}

func nodeName(flag string) string {
	if flag != "" {
		return flag
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "custos"
	}
	return h
}
