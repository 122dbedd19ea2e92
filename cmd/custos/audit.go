package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
)

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify and export the audit log",
		Long: `The audit log (D/audit.db) holds one hash-chained record for every list,
templates list and read, allowed or denied, written durably before any data
was released. The log is itself PHI, so every command that reads it first
appends an access record to it (action audit/<verb>; who: your OS account and
--by; why: --purpose, an HL7 ActReason code, required except for verify,
which defaults to HOPERAT). They work next to a running server: given
--data-dir D they reach it through its admin socket D/admin.sock, and when no
server runs they open the log themselves (docs/audit-access.md).

Examples:
  custos audit verify --data-dir ./data
  custos audit report --data-dir ./data --purpose HOPERAT --denials --since 2026-11-01
  custos audit export --data-dir ./data --purpose HOPERAT --by j.doe --out ./nov-bundle --since 2026-11-01 --until 2026-12-01`,
	}
	return commandGroup(cmd, newAuditVerifyCmd(), newAuditExportCmd(), newAuditHashCmd(), newAuditReportCmd(), newAuditProveCmd(), newAuditPubkeyCmd())
}

func newAuditVerifyCmd() *cobra.Command {
	var (
		dir, bundleDir, pubkey, anchorDir string
		asJSON                            bool
		af                                accessFlags
		runAuditVerify                    func(*cobra.Command) error
	)
	cmd := &cobra.Command{
		Use:   "verify (--data-dir D [--pubkey FILE [--anchor-dir A]] | --bundle DIR --pubkey FILE)",
		Short: "Verify the audit log, or an exported bundle offline, and report every problem",
		Long: `verify --data-dir recomputes the hash of every record, checks each record's
canonical encoding, its link to the previous record (prev_hash), sequence
continuity and time order, the Merkle tree (every leaf and stored hash, and
the root), and the stored head. It reports every problem found, with the
record's seq, what was expected and what was found, and exits 1 if there is
any (exit status below). Exit 0 means the log is intact. With --pubkey it also checks the log
against every signed checkpoint in D/checkpoints.jsonl (and, with
--anchor-dir, in A/checkpoints.jsonl), as serve does at startup, and the
seals of sealed segments: a log that is internally intact but rolled back,
truncated or forked fails here.

verify --bundle checks an export bundle ('custos audit export --out DIR')
offline — no server, no Vault, no bbolt: the signatures on both checkpoints
against the verifier keys (--pubkey, from 'custos audit pubkey'), the
consistency proof between them, every record's canonical encoding, the seq
range with no gap, the prev_hash chain, time order, and completeness (the
records and the range proof recompute the signed root: no record is missing,
added or changed). It prints a transcript to attach to an audit report and
exits 1 naming every failure with its seq.

Exit status (both forms):
  0  verified: no problem found
  1  problems found: broken or edited records, gaps, a rollback or fork
     against the checkpoints, a checkpoint signed by no key in --pubkey
     (a verifier file for another key, e.g. one written before the
     signing key was rotated: 'custos audit pubkey' writes the current
     one), a bundle file that differs, an audit.db or
     segment file that is damaged (empty, truncated, not a bbolt database:
     segment_damaged) (each is printed)
  2  could not verify, so no verdict: bad flags, a --data-dir, --bundle or
     --pubkey that cannot be read (with --pubkey, D/checkpoints.jsonl too),
     verifier keys that hold no usable key, a log that cannot be opened
     (locked by another process, not an audit log, a file that cannot be
     read); with --pubkey, also
     anchors left unchecked ("UNCHECKED anchor": no anchored checkpoint in
     D/checkpoints.jsonl or A/checkpoints.jsonl to check against; with
     --anchor-dir, an A/checkpoints.jsonl that is missing or holds no
     checkpoint, however many D holds: the anchor asked for was not
     checked; or a damaged log that cannot be opened for writing) when the
     records and D's checkpoints themselves have no problem

On a terminal, verify --data-dir draws its progress (records checked) and
verify --bundle its own (bytes of the bundle's files checked) on stderr,
not with --json; the output is the same either way.

Examples:
  custos audit verify --data-dir ./data
  custos audit verify --data-dir ./data --json
  custos audit verify --data-dir ./data --pubkey custos-audit.vkeys
  custos audit verify --data-dir ./data --anchor-dir /mnt/audit-anchor/custos --pubkey custos-audit.vkeys
  custos audit verify --bundle ./nov-bundle --pubkey custos-audit.vkeys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuditVerify(cmd)
		},
	}
	runAuditVerify = func(cmd *cobra.Command) error {
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
		if err := af.check(access.ActionVerify); err != nil {
			return err
		}
		req := access.VerifyRequest{Ask: af.ask()}
		if pubkey != "" {
			// With or without --anchor-dir: the keys also check the
			// data directory's checkpoints and the seals of sealed
			// segments (they were dropped without --anchor-dir, and
			// the log reported intact unchecked). Checked here, before
			// the log is opened: a key file that holds no usable key
			// would otherwise be reported as a log that does not match
			// its checkpoints.
			if _, err := readVerifiers(pubkey); err != nil {
				return err
			}
			if req.VerifierKeys, err = os.ReadFile(pubkey); err != nil {
				return err
			}
		}
		if anchorDir != "" {
			if req.Anchor, err = readAnchorFile(anchorDir); err != nil {
				return err
			}
			req.AnchorName = (&checkpoint.Anchor{Dir: anchorDir}).Path()
		}
		var res access.VerifyResult
		ran := false
		tick, done := auditProgress(cmd, asJSON, "verifying the audit log")
		err = withAuditReader(cmd, d, func(r auditReader) error {
			ran = true
			_, err := r.DoProgress(cmd.Context(), access.OpVerify, req, decodeInto(&res), tick)
			return err
		})
		done()
		if err != nil && !ran && errors.Is(err, audit.ErrCorrupt) {
			// The log cannot take the access record; verification of
			// evidence must not depend on it (docs/audit-access.md).
			fmt.Fprintf(cmd.ErrOrStderr(), "custos: warning: this verification is not recorded in the audit log: %v\n", err)
			res, err = verifyUnrecorded(cmd, d, req, err)
		}
		if err != nil {
			return err
		}
		return printVerify(cmd, res, asJSON, pubkey)
	}
	af.register(cmd.Flags(), "purpose of use, an HL7 ActReason code (default HOPERAT: health care operations)")
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	cmd.Flags().StringVar(&bundleDir, "bundle", "", "verify this export bundle offline instead")
	cmd.Flags().StringVar(&pubkey, "pubkey", "", "verifier keys file ('custos audit pubkey'): check the signed checkpoints and seals (required with --bundle and --anchor-dir)")
	cmd.Flags().StringVar(&anchorDir, "anchor-dir", "", "with --data-dir: also check against the checkpoints anchored here")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return asCheck(cmd)
}

// parseTime accepts RFC 3339 or a plain date (YYYY-MM-DD, midnight UTC).
func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t, err = time.Parse("2006-01-02", v)
	}
	if err == nil {
		if t.IsZero() {
			// The zero instant means "no bound" to every caller: an explicit
			// --until 0001-01-01T00:00:00Z would silently widen the range
			// to the whole log.
			return time.Time{}, usagef("--%s %q is the zero instant, which means no bound: give a real instant, or leave the flag out", flag, v)
		}
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
		asJSON                             bool
		af                                 accessFlags
	)
	cmd := &cobra.Command{
		Use:   "export --data-dir D --purpose CODE (--out DIR [--json] | --format jsonl|csv [-o FILE]) [--since T] [--until T]",
		Short: "Export an auditor's bundle (records, signed checkpoints, proofs), or records as JSON lines or CSV",
		Long: `export --out DIR writes an export bundle for auditors: the exact record bytes
of a range (--from-seq/--to-seq, or --since/--until) in records.jsonl, the
two signed checkpoints that bracket it, the consistency proof between them and
the range proof that makes the range provably complete (proof.json), a
manifest with every file's SHA-256, and human formats (--formats, default
csv,fhir,ocsf: CSV, FHIR R4 AuditEvent per IHE BALP, OCSF API Activity). An
auditor checks it offline with 'custos audit verify --bundle DIR --pubkey F'.
The bundle's upper checkpoint must cover the range: records newer than the
latest checkpoint are not exported until the next one. Without --to-seq (or
--until) the range ends at the latest checkpoint. A --from-seq or --to-seq
past the log's end is refused (exit 2) before anything is recorded, naming
the records the log holds. It prints one line on stdout, 'bundle DIR: records
F..T (N), checkpoints at sizes L and U, origin O'; --json prints instead one
JSON document for an auditor's script: {"bundle": DIR, "manifest":
"sha256:<hex>" of DIR/manifest.json, and the manifest's fields: "format",
"origin", "from", "to", "records", "lower_size", "upper_size", "files" (each
other file's name in DIR and "sha256:<hex>"), "created"; and "signed_by":
the keys whose signatures the checkpoints carry, named as in a verifier
file, "origin+hash", not checked here: the verifier keys an auditor
needs}. --json goes with --out only. DIR appears only complete, and only
for an export that succeeds: the bundle is received in a hidden
.DIR.partial-* beside it and renamed to DIR once its report above is made;
if the report cannot be printed it is taken back (nothing is left, a DIR
given empty is empty again).

export --format writes the audit records in [--since, --until) to stdout or to FILE.
jsonl writes each record's exact canonical bytes, one per line, so every line
can be re-hashed independently (see docs/audit-format.md); csv writes one row
per record with a header, for spreadsheets: a cell a spreadsheet would
evaluate as a formula gets a leading ', and an invisible format character (a
bidi control such as a right-to-left override, a zero-width character), a
control character (ESC, C1, a vertical tab; not a tab or a line break) and a
line or paragraph separator (U+2028, U+2029) are written as the text of their
escape, \u202e, \x1b, \u2028 (docs/audit-format.md, section 6).

Each record exported is checked as it is read: its bytes must hash to its
stored hash and its prev_hash must be the stored hash of the record before
it. A record that fails (changed in place, or a chain relinked around one)
does not stop the export: every record asked for is written as stored (the
evidence; with -o the file is kept), and the command exits 1 naming the
first damaged record by seq, what was expected and what was found, and how
many problems there were. This is not a verification: 'custos audit verify'
checks the whole log (tree, seals, gaps, time order) and lists every
problem. An intact log's export exits 0.

Exit status: 0 exported (an intact log's records); 1 a damaged log's
records written as stored (above), or the export failed (the error says
why; with -o or --out nothing is left behind); 2 bad usage, a range past
the log's end included (nothing recorded or written).

With -o the file is written without a name (or, where the file system cannot,
under a hidden temporary one) and named when complete, so a failed or killed
export never leaves a partial file. The export is itself PHI: store it
accordingly.

On a terminal, export draws its progress (records read) on stderr, unless
the records themselves go to that terminal; the output is the same either
way.

Example:
  custos audit export --data-dir ./data --purpose HOPERAT --out ./nov-bundle --since 2026-11-01 --until 2026-12-01
  custos audit export --data-dir ./data --purpose HOPERAT --format jsonl -o audit.jsonl
  custos audit export --data-dir ./data --purpose HOPERAT --format csv --since 2026-11-01 --until 2026-12-01`,
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
				if toSeq != 0 && fromSeq > toSeq {
					return usagef("--from-seq %d is after --to-seq %d: the range holds no record", fromSeq, toSeq)
				}
				return writeBundle(cmd, d, af.ask(), bundleOut, anchorDir, fromSeq, toSeq, since, until, formats, asJSON)
			}
			if asJSON {
				return usagef("--json describes an --out DIR bundle; --format writes the records themselves")
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
			if outPath != "" && outPath != "-" {
				if err := checkOutputFile("-o", outPath); err != nil {
					return err
				}
			}
			if err := af.check(access.ActionExport); err != nil {
				return err
			}
			req := access.ExportRequest{Ask: af.ask(), Format: f, Since: s, Until: u}
			export := func(w io.Writer) (n int, err error) {
				// Records to a terminal and a bar beside them would garble
				// each other: a bar only when they go elsewhere.
				tick, done := auditProgress(cmd, w == cmd.OutOrStdout() && isTerminal(w), "exporting records")
				defer done()
				err = withAuditReader(cmd, d, func(r auditReader) error {
					res, err := r.DoProgress(cmd.Context(), access.OpExport, req, func(rd io.Reader) error {
						_, err := io.Copy(w, rd)
						return err
					}, tick)
					n = res.Records
					return err
				})
				return n, err
			}
			if outPath == "" || outPath == "-" {
				_, err := export(cmd.OutOrStdout())
				return damagedExport(err, "the output above", d)
			}
			out, err := createExportFile(outPath)
			if err != nil {
				return err
			}
			n, err := export(out)
			damaged := errors.Is(err, audit.ErrExportDamaged)
			if err == nil || damaged {
				// A damaged log's export is complete: the records as
				// stored are the evidence, kept, and the exit is 1.
				if perr := out.publish(); perr != nil {
					var unconfirmed *unconfirmedError
					if errors.As(perr, &unconfirmed) {
						// In place, complete: no "nothing written".
						return fmt.Errorf("exported %d records, but %w", n, errors.Join(perr, damagedExport(err, outPath, d)))
					}
					err = perr
					damaged = false
				}
			} else {
				out.discard()
			}
			if damaged {
				return damagedExport(err, outPath, d)
			}
			if err != nil {
				return fmt.Errorf("export failed, nothing written to %s: %w", outPath, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d records to %s\n", n, outPath)
			return nil
		},
	}
	fl := cmd.Flags()
	af.register(fl, purposeRequired)
	fl.StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	fl.StringVar(&format, "format", "jsonl", "jsonl or csv")
	fl.StringVar(&since, "since", "", "first instant to include (RFC 3339 or YYYY-MM-DD)")
	fl.StringVar(&until, "until", "", "instant to stop before (RFC 3339 or YYYY-MM-DD)")
	fl.StringVarP(&outPath, "output", "o", "", "write to FILE instead of stdout")
	fl.StringVar(&bundleOut, "out", "", "write an export bundle into this new directory (missing or empty; not a symbolic link)")
	fl.Uint64Var(&fromSeq, "from-seq", 0, "bundle: first record (default 1)")
	fl.Uint64Var(&toSeq, "to-seq", 0, "bundle: last record (default: the last one the latest signed checkpoint covers; newer records, this export's access record among them, are not anchored yet)")
	fl.StringVar(&formats, "formats", "csv,fhir,ocsf", "bundle: human formats to add (csv, fhir, ocsf; empty for none)")
	fl.StringVar(&anchorDir, "anchor-dir", "", "bundle: take the checkpoints from this anchor directory (default: the data directory's)")
	fl.BoolVar(&asJSON, "json", false, "bundle: print what was written as JSON")
	markRequired(cmd, "data-dir", "purpose")
	return cmd
}

// damagedExport is the error of an export to where (a file, or the
// output above) that was written whole but holds records that do not
// verify (audit.ErrExportDamaged; exit 1): it says the output is complete
// and where to see every problem. Any other err is returned as it is.
func damagedExport(err error, where string, d dataDir) error {
	if !errors.Is(err, audit.ErrExportDamaged) {
		return err
	}
	return fmt.Errorf("the audit log is damaged: %v; %s holds every record asked for, as stored (the evidence: keep it), but is no export of an intact log; run 'custos audit verify --data-dir %s' for every problem", err, where, d)
}

// printVerify prints a verification's result: every problem, then OK or
// FAILED (or the result as JSON), and fails with exit 1 if it found any;
// otherwise, when the anchors were not checked (AnchorResult.NotChecked),
// with no verdict (exit 2): the records' verdict is printed, the anchors'
// is missing. pubkey is the --pubkey file, named when it holds no key
// that signed a checkpoint.
func printVerify(cmd *cobra.Command, res access.VerifyResult, asJSON bool, pubkey string) error {
	out := cmd.OutOrStdout()
	anchorFailed := res.Anchor != nil && !res.Anchor.OK && res.Anchor.NotChecked == ""
	unchecked := ""
	if res.Anchor != nil {
		unchecked = res.Anchor.NotChecked
	}
	if asJSON {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		for _, p := range res.Problems {
			fmt.Fprintf(out, "BROKEN seq=%d kind=%s expected=%s got=%s %s\n", p.Seq, p.Kind, p.Expected, p.Got, p.Detail)
		}
		if anchorFailed {
			fmt.Fprintf(out, "BROKEN anchor: %s\n", res.Anchor.Error)
		}
		sum := res.Summary
		if len(res.Problems) == 0 && !anchorFailed {
			fmt.Fprintf(out, "OK: %d records, chain and tree intact, head seq=%d hash=%s\n", sum.Records, sum.HeadSeq, sum.HeadHash)
			if res.Anchor != nil && unchecked == "" {
				fmt.Fprintf(out, "OK: consistent with %s\n", res.Anchor.Checked)
			}
		}
		if unchecked != "" {
			fmt.Fprintf(out, "UNCHECKED anchor: %s\n", unchecked)
		}
		if len(res.Problems) > 0 || anchorFailed {
			fmt.Fprintf(out, "FAILED: %d problem(s) in %d records\n", len(res.Problems)+btoi(anchorFailed), sum.Records)
		}
	}
	if anchorFailed && signedByNoKeyGiven(res.Anchor) {
		// Nothing vouches for the log (exit 1, as before), but what is
		// wrong is most likely the verifier file, not the log: after a
		// rotation of the signing key an old file verifies no new
		// checkpoint, and "does not match" read like a fork.
		return problemsFound(errors.New(anchorFailure(access.AnchorUnknownKey, "--pubkey "+pubkey)))
	}
	if anchorFailed {
		return problemsFound(errors.New(anchorFailure(access.AnchorMismatch, "")))
	}
	if len(res.Problems) > 0 {
		return problemsFound(fmt.Errorf("audit log verification failed: %d problem(s)", len(res.Problems)))
	}
	if unchecked != "" {
		return errors.New("no verdict on the anchored checkpoints: they were not checked (see UNCHECKED anchor); the records verified (without --pubkey the verdict is theirs alone)")
	}
	return nil
}

// anchorFailure is what a failed anchor check means, by its cause
// (access.AnchorResult.Cause, report.AnchorCheck.Cause; none is read as a
// mismatch, see signedByNoKeyGiven): keys names the verifier keys given
// ("--pubkey FILE"). 'audit verify' and 'compliance report' say it alike.
func anchorFailure(cause, keys string) string {
	if cause != access.AnchorUnknownKey {
		return "audit log does not match its anchored checkpoints"
	}
	return keys + " holds no key that signed the anchored checkpoint (BROKEN anchor): the verifier file is for another signing key, " +
		"written before the key was rotated or for another --deployment or --node; write the current one with 'custos audit pubkey --data-dir D' " +
		"and verify again (if it is current, the checkpoint was not signed by this log's key)"
}

// signedByNoKeyGiven reports whether the anchor check failed because the
// latest anchored checkpoint carries no signature by a key in the verifier
// file (checkpoint.ErrUnknownKey: a verifier file for another signing key
// version or origin) rather than because the log does not match a
// checkpoint that verified, or a signature by a key in the file does not
// verify (a changed note), or a rollback acknowledgement is signed by no
// key in the file (the file verified the latest checkpoint, so it is the
// log's and the acknowledgement someone else's): AnchorResult.Cause, set
// by the operation where the error is made. It was told from the error's
// text, which holds the anchor file's name: an --anchor-dir named with
// that text made a fork read as a key problem. A result without Cause
// (a server older than the field, over the admin socket) is read as a
// mismatch, the alarming reading, and never from the text: the exit is 1
// either way, and the BROKEN anchor line printed above still carries the
// server's whole error, which names the key that signed.
func signedByNoKeyGiven(a *access.AnchorResult) bool {
	return a != nil && a.Cause == access.AnchorUnknownKey
}

// verifyUnrecorded verifies a log that cannot take an access record (it
// cannot be opened for writing: cause, e.g. a damaged head or a missing
// segment): read-only, under a shared lock, and without the anchor and
// seal note checks, which need a log that opens; the anchor line of the
// result says so and why.
func verifyUnrecorded(cmd *cobra.Command, d dataDir, req access.VerifyRequest, cause error) (access.VerifyResult, error) {
	res := access.VerifyResult{Problems: []audit.Problem{}}
	sum, err := audit.VerifyFile(cmd.Context(), d.audit(), func(p audit.Problem) { res.Problems = append(res.Problems, p) })
	if err != nil {
		return res, lockHint(err)
	}
	res.Summary, res.OK = sum, len(res.Problems) == 0
	if len(req.VerifierKeys) > 0 {
		res.Anchor = &access.AnchorResult{NotChecked: fmt.Sprintf("not checked, nor the seal notes: the log cannot be opened for writing (%v)", cause)}
		res.OK = false
	}
	return res, nil
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
