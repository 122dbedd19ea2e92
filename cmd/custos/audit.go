package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
)

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify and export the audit log",
		Long: `The audit log (D/audit.db) holds one hash-chained record for every list,
templates list and read, allowed or denied, written durably before any data
was released. These commands open it read-only; stop 'custos serve' first
(the server holds the file lock).

Examples:
  custos audit verify --data-dir ./data
  custos audit report --data-dir ./data --denials --since 2026-11-01
  custos audit export --data-dir ./data --out ./nov-bundle --since 2026-11-01 --until 2026-12-01`,
	}
	return commandGroup(cmd, newAuditVerifyCmd(), newAuditExportCmd(), newAuditHashCmd(), newAuditReportCmd(), newAuditProveCmd(), newAuditPubkeyCmd())
}

func newAuditVerifyCmd() *cobra.Command {
	var (
		dir, bundleDir, pubkey, anchorDir string
		asJSON                            bool
	)
	cmd := &cobra.Command{
		Use:   "verify (--data-dir D [--anchor-dir A --pubkey FILE] | --bundle DIR --pubkey FILE)",
		Short: "Verify the audit log, or an exported bundle offline, and report every problem",
		Long: `verify --data-dir recomputes the hash of every record, checks each record's
canonical encoding, its link to the previous record (prev_hash), sequence
continuity and time order, the Merkle tree (every leaf and stored hash, and
the root), and the stored head. It reports every problem found, with the
record's seq, what was expected and what was found, and exits 1 if there is
any. Exit 0 means the log is intact. With --anchor-dir and --pubkey it also
checks the log against every signed checkpoint in D/checkpoints.jsonl and
A/checkpoints.jsonl, as serve does at startup: a log that is internally intact
but rolled back, truncated or forked fails here.

verify --bundle checks an export bundle ('custos audit export --out DIR')
offline — no server, no Vault, no bbolt: the signatures on both checkpoints
against the verifier keys (--pubkey, from 'custos audit pubkey'), the
consistency proof between them, every record's canonical encoding, the seq
range with no gap, the prev_hash chain, time order, and completeness (the
records and the range proof recompute the signed root: no record is missing,
added or changed). It prints a transcript to attach to an audit report and
exits 1 naming every failure with its seq.

Examples:
  custos audit verify --data-dir ./data
  custos audit verify --data-dir ./data --json
  custos audit verify --data-dir ./data --anchor-dir /mnt/anchor --pubkey custos-audit.vkeys
  custos audit verify --bundle ./nov-bundle --pubkey custos-audit.vkeys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bundleDir != "" {
				if dir != "" {
					return usagef("choose --data-dir (the live log) or --bundle (an export), not both")
				}
				if anchorDir != "" {
					return usagef("--anchor-dir checks the live log (--data-dir); a bundle carries its own checkpoints")
				}
				return newAuditVerifyBundle(cmd, bundleDir, pubkey, asJSON)
			}
			if anchorDir != "" && pubkey == "" {
				return usagef("--anchor-dir needs --pubkey FILE (the checkpoint verifier keys, from 'custos audit pubkey')")
			}
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if err := existingFile(d.audit(), "audit log"); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var problems []audit.Problem
			sum, err := audit.VerifyFile(cmd.Context(), d.audit(), func(p audit.Problem) {
				problems = append(problems, p)
				if !asJSON {
					fmt.Fprintf(out, "BROKEN seq=%d kind=%s expected=%s got=%s %s\n", p.Seq, p.Kind, p.Expected, p.Got, p.Detail)
				}
			})
			if err != nil {
				return lockHint(err)
			}
			// Against the anchored checkpoints: catches a rolled-back,
			// truncated or forked log that is internally intact.
			anchored, anchorErr := "", error(nil)
			if anchorDir != "" {
				anchored, anchorErr = checkAnchors(cmd, d, anchorDir, pubkey)
				if anchorErr != nil && !asJSON {
					fmt.Fprintf(out, "BROKEN anchor: %v\n", anchorErr)
				}
			}
			if asJSON {
				if problems == nil {
					problems = []audit.Problem{}
				}
				res := map[string]any{"ok": len(problems) == 0 && anchorErr == nil, "summary": sum, "problems": problems}
				if anchorDir != "" {
					res["anchor"] = map[string]any{"ok": anchorErr == nil, "checked": anchored, "error": errText(anchorErr)}
				}
				if err := writeJSON(out, res); err != nil {
					return err
				}
			} else if len(problems) == 0 && anchorErr == nil {
				fmt.Fprintf(out, "OK: %d records, chain and tree intact, head seq=%d hash=%s\n", sum.Records, sum.HeadSeq, sum.HeadHash)
				if anchored != "" {
					fmt.Fprintf(out, "OK: consistent with %s\n", anchored)
				}
			} else {
				fmt.Fprintf(out, "FAILED: %d problem(s) in %d records\n", len(problems)+btoi(anchorErr != nil), sum.Records)
			}
			if anchorErr != nil {
				return exitError{code: 1, err: fmt.Errorf("audit log does not match its anchored checkpoints")}
			}
			if len(problems) > 0 {
				return exitError{code: 1, err: fmt.Errorf("audit log verification failed: %d problem(s)", len(problems))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	cmd.Flags().StringVar(&bundleDir, "bundle", "", "verify this export bundle offline instead")
	cmd.Flags().StringVar(&pubkey, "pubkey", "", "verifier keys file ('custos audit pubkey'), with --bundle or --anchor-dir")
	cmd.Flags().StringVar(&anchorDir, "anchor-dir", "", "with --data-dir: also check against the checkpoints anchored here")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// parseTime accepts RFC 3339 or a plain date (YYYY-MM-DD, midnight UTC).
func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, usagef("--%s %q: want RFC 3339 (2026-11-21T10:00:00Z) or a date (2026-11-21)", flag, v)
}

// parseTimeRange parses --since and --until (either may be empty) and
// checks that until is after since.
func parseTimeRange(since, until string) (s, u time.Time, err error) {
	if s, err = parseTime("since", since); err != nil {
		return s, u, err
	}
	if u, err = parseTime("until", until); err != nil {
		return s, u, err
	}
	if !s.IsZero() && !u.IsZero() && !u.After(s) {
		return s, u, usagef("--until must be after --since")
	}
	return s, u, nil
}

func newAuditExportCmd() *cobra.Command {
	var (
		dir, format, since, until, outPath string
		bundleOut, anchorDir, formats      string
		fromSeq, toSeq                     uint64
	)
	cmd := &cobra.Command{
		Use:   "export --data-dir D (--out DIR | --format jsonl|csv [-o FILE]) [--since T] [--until T]",
		Short: "Export an auditor's bundle (records, signed checkpoints, proofs), or records as JSON lines or CSV",
		Long: `export --out DIR writes an export bundle for auditors: the exact record bytes
of a range (--from-seq/--to-seq, or --since/--until) in records.jsonl, the
two signed checkpoints that bracket it, the consistency proof between them and
the range proof that makes the range provably complete (proof.json), a
manifest with every file's SHA-256, and human formats (--formats, default
csv,fhir,ocsf: CSV, FHIR R4 AuditEvent per IHE BALP, OCSF API Activity). An
auditor checks it offline with 'custos audit verify --bundle DIR --pubkey F'.
The bundle's upper checkpoint must cover the range: records newer than the
latest checkpoint are not exported until the next one.

export --format writes the audit records in [--since, --until) to stdout or to FILE.
jsonl writes each record's exact canonical bytes, one per line, so every line
can be re-hashed independently (see docs/audit-format.md); csv writes one row
per record with a header, for spreadsheets.

With -o the file is written to a temporary name and renamed when complete, so
a failed export never leaves a partial file. The export is itself PHI: store
it accordingly.

Example:
  custos audit export --data-dir ./data --out ./nov-bundle --since 2026-11-01 --until 2026-12-01
  custos audit export --data-dir ./data --format jsonl -o audit.jsonl
  custos audit export --data-dir ./data --format csv --since 2026-11-01 --until 2026-12-01`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if bundleOut != "" {
				if cmd.Flags().Changed("format") || outPath != "" {
					return usagef("--out DIR writes a bundle; --format and -o are for a single file")
				}
				if err := existingFile(d.audit(), "audit log"); err != nil {
					return err
				}
				return writeBundle(cmd, d, bundleOut, anchorDir, fromSeq, toSeq, since, until, formats)
			}
			if fromSeq != 0 || toSeq != 0 {
				return usagef("--from-seq/--to-seq select a bundle range: add --out DIR")
			}
			f := audit.Format(format)
			if f != audit.FormatJSONL && f != audit.FormatCSV {
				return usagef("--format must be jsonl or csv, got %q", format)
			}
			s, u, err := parseTimeRange(since, until)
			if err != nil {
				return err
			}
			if err := existingFile(d.audit(), "audit log"); err != nil {
				return err
			}
			filter := audit.Filter{Since: s, Until: u}
			if outPath == "" || outPath == "-" {
				_, err := audit.ExportFile(cmd.Context(), d.audit(), cmd.OutOrStdout(), f, filter)
				return lockHint(err)
			}
			tmp, err := os.CreateTemp(filepath.Dir(outPath), ".custos-export-*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			n, err := audit.ExportFile(cmd.Context(), d.audit(), tmp, f, filter)
			if err == nil {
				err = tmp.Sync()
			}
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Chmod(tmp.Name(), 0o600)
			}
			if err == nil {
				err = os.Rename(tmp.Name(), outPath)
			}
			if err != nil {
				return fmt.Errorf("export failed, nothing written to %s: %w", outPath, lockHint(err))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d records to %s\n", n, outPath)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	fl.StringVar(&format, "format", "jsonl", "jsonl or csv")
	fl.StringVar(&since, "since", "", "first instant to include (RFC 3339 or YYYY-MM-DD)")
	fl.StringVar(&until, "until", "", "instant to stop before (RFC 3339 or YYYY-MM-DD)")
	fl.StringVarP(&outPath, "output", "o", "", "write to FILE instead of stdout")
	fl.StringVar(&bundleOut, "out", "", "write an export bundle into this new directory")
	fl.Uint64Var(&fromSeq, "from-seq", 0, "bundle: first record (default 1)")
	fl.Uint64Var(&toSeq, "to-seq", 0, "bundle: last record (default: the head)")
	fl.StringVar(&formats, "formats", "csv,fhir,ocsf", "bundle: human formats to add (csv, fhir, ocsf; empty for none)")
	fl.StringVar(&anchorDir, "anchor-dir", "", "bundle: take the checkpoints from this anchor directory (default: the data directory's)")
	return cmd
}

// checkAnchors checks the log in d against the checkpoints of d and of
// anchorDir, verified with the keys in pubkey. It returns what it checked.
func checkAnchors(cmd *cobra.Command, d dataDir, anchorDir, pubkey string) (string, error) {
	keys, err := os.ReadFile(pubkey)
	if err != nil {
		return "", err
	}
	verifiers, err := checkpoint.ParseVerifierFile(keys)
	if err != nil {
		return "", err
	}
	entries, err := checkpoint.Load(&checkpoint.Anchor{Dir: string(d)}, &checkpoint.Anchor{Dir: anchorDir})
	if err != nil {
		return "", err
	}
	log, err := audit.Open(d.audit(), audit.Options{ReadOnly: true})
	if err != nil {
		return "", lockHint(err)
	}
	defer log.Close()
	if err := checkpoint.CheckAgainst(cmd.Context(), log, entries, verifiers); err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "no anchored checkpoint", nil
	}
	last := entries[len(entries)-1]
	return fmt.Sprintf("%d anchored checkpoints (latest: size %d, root %s)", len(entries), last.Size, last.Root), nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
