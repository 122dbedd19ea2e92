package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/internal/partialdir"
)

func newBackupCmd() *cobra.Command {
	var (
		dir, out, pubkey string
		asJSON           bool
		af               accessFlags
	)
	cmd := &cobra.Command{
		Use:   "backup --data-dir D --out DIR --purpose P",
		Short: "Take a verified online backup of a data directory",
		Long: `backup copies catalog.db, audit.db and grants.db of D, with bbolt's hot
backup (one read transaction per file), together with D's anchored
checkpoints and a manifest (sizes, SHA-256, the audit head and tree, the
latest anchored checkpoint), into the new directory DIR. It runs next to a
running server (through D/admin.sock) or on a stopped server's files.

Reading the audit log for a backup is itself recorded first: an access record
with action "backup", your OS account, --by and --purpose (required).

DIR is written complete or not at all: the backup is received beside it,
verified (every record of the audit copy, its tree against the manifest and
against the checkpoints at or below its head — their signatures too with
--pubkey — and bbolt's consistency check of the catalog and grants copies),
fsynced, and only then renamed to DIR. A backup that does not verify is
removed, and the command exits 1 naming every problem.

Exit status: 0 the backup is written and verified; 1 no backup was written
(the copy does not verify, or it could not be taken: the message says
which; or its report could not be printed, and the backup was taken back);
2 bad usage. backup is an operation, not a check: to check the live
log itself, run 'custos audit verify'.

Keys are not in a backup (they live in Vault; a --dev directory's dev key
file is copied). Nor is the external anchor directory: keep it where it is,
it is what 'custos restore' checks a backup against.

On a terminal, backup draws its progress on stderr (the copy's bytes, then
the verification's steps), not with --json.

Example:
  custos backup --data-dir /var/lib/custos --out /backup/custos-2026-11-30 --purpose HOPERAT --by j.doe`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if out == "" {
				return usagef("--out DIR is required (a new or empty directory)")
			}
			if err := checkParentDir("--out", out); err != nil {
				return err
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			if err := backup.CheckDest(abs); err != nil {
				if errors.Is(err, backup.ErrExists) {
					// Bad usage, refused before the log is opened.
					return usagef("--out %s is not empty: a backup is written into a new or empty directory", out)
				}
				return err
			}
			var verifiers note.Verifiers
			if pubkey != "" {
				if verifiers, err = readVerifiers(pubkey); err != nil {
					return err
				}
			}
			if err := af.check(access.ActionBackup); err != nil {
				return err
			}
			var staged *backup.Staged
			var res access.Result
			tick, done := auditProgress(cmd, asJSON, "copying")
			err = withAuditReader(cmd, d, func(r auditReader) error {
				var err error
				res, err = r.DoProgress(cmd.Context(), access.OpBackup, access.BackupRequest{Ask: af.ask(), Out: abs}, func(rd io.Reader) error {
					staged, err = backup.Receive(rd, abs)
					return err
				}, tick)
				return err
			})
			done()
			if err != nil {
				if staged != nil {
					staged.Discard()
				}
				return fmt.Errorf("backup NOT written: %w", err)
			}
			defer staged.Discard()
			for _, p := range staged.Removed {
				fmt.Fprintf(cmd.ErrOrStderr(), "removed %s, left by an interrupted backup to the same --out\n", p)
			}
			var stepsDone func()
			staged.Progress, stepsDone = stepProgress(cmd, asJSON)
			rep, err := staged.Commit(cmd.Context(), verifiers)
			stepsDone()
			if err != nil {
				if errors.Is(err, backup.ErrUnverified) {
					printBackupProblems(cmd.ErrOrStderr(), rep)
					return exitError{code: 1, err: fmt.Errorf("backup NOT written: the copy does not verify (%d problem(s)); nothing was left at %s", len(rep.Problems), abs)}
				}
				if errors.As(err, new(*partialdir.NotTakenBackError)) {
					return notPublished(backupOutput, abs, err)
				}
				return fmt.Errorf("backup NOT written: %w", err)
			}
			// A report that cannot be printed (a closed pipe) takes the
			// backup back: "1 no backup was written" stays true.
			var report bytes.Buffer
			if asJSON {
				err = writeJSON(&report, rep)
			} else {
				printBackup(&report, abs, rep, res)
			}
			if err == nil {
				_, err = cmd.OutOrStdout().Write(report.Bytes())
			}
			if err != nil {
				if werr := staged.Withdraw(); werr != nil {
					return notTakenBack(backupOutput, abs, err, werr)
				}
				return fmt.Errorf("backup NOT written (taken back from %s): printing its report: %w", abs, err)
			}
			return nil
		},
	}
	af.register(cmd.Flags(), purposeRequired)
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory to back up")
	f.StringVar(&out, "out", "", "new (or empty) directory to write the backup to")
	f.StringVar(&pubkey, "pubkey", "", "verifier keys file ('custos audit pubkey'): also check the checkpoints' signatures")
	f.BoolVar(&asJSON, "json", false, "print the verification report as JSON")
	markRequired(cmd, "data-dir", "out", "purpose")
	return cmd
}

// stepProgress draws the progress of a backup's or restore's local steps
// (backup.Progress) on stderr, one bar per step, as auditProgress does: nil
// when no bar is drawn. finish clears the last bar.
func stepProgress(cmd *cobra.Command, asJSON bool) (func(backup.Progress), func()) {
	w := progressTo(cmd, asJSON)
	if !isTerminal(w) {
		return nil, func() {}
	}
	var step string
	var tick func(done, total int64)
	end := func() {}
	return func(p backup.Progress) {
		if tick == nil || p.Step != step {
			end()
			step = p.Step
			tick, end = progressBar(w, p.Step, true, !p.Records)
		}
		tick(p.Done, p.Total)
	}, func() { end() }
}

// readVerifiers reads a verifier keys file ('custos audit pubkey').
func readVerifiers(path string) (note.Verifiers, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--pubkey: %w", err)
	}
	v, err := checkpoint.ParseVerifierFile(b)
	if err != nil {
		return nil, fmt.Errorf("--pubkey %s: %w", path, err)
	}
	return v, nil
}

func printBackup(w io.Writer, out string, rep backup.Report, res access.Result) {
	m := rep.Manifest
	fmt.Fprintf(w, "OK: backup written to %s\n", out)
	for _, f := range m.Files {
		fmt.Fprintf(w, "  %-18s %12d bytes  sha256 %s\n", f.Name, f.Bytes, f.SHA256)
	}
	fmt.Fprintf(w, "audit: head seq=%d hash=%s, tree size %d root %s; verified\n", m.Audit.HeadSeq, m.Audit.HeadHash, m.Audit.TreeSize, m.Audit.TreeRoot)
	fmt.Fprintf(w, "access record: seq=%d (action %s)\n", res.AccessSeq, backup.ActionBackup)
	switch {
	case m.Checkpoint == nil:
		fmt.Fprintln(w, "checkpoints: none anchored yet")
	case rep.Signatures:
		fmt.Fprintf(w, "checkpoints: %d, latest size %d root %s; consistent, signature verified\n", m.Checkpoints, m.Checkpoint.Size, m.Checkpoint.Root)
	default:
		fmt.Fprintf(w, "checkpoints: %d, latest size %d root %s; consistent (signatures not checked: no --pubkey)\n", m.Checkpoints, m.Checkpoint.Size, m.Checkpoint.Root)
	}
}

func printBackupProblems(w io.Writer, rep backup.Report) {
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "BROKEN %s\n", p)
	}
}
