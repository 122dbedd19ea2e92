package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/cmd/custos/internal/config"
	"github.com/custos-mcp/custos/compliance"
	"github.com/custos-mcp/custos/compliance/report"
	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/internal/partialdir"
	"github.com/custos-mcp/custos/policy/btg"
)

func newComplianceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compliance",
		Short: "Produce the auditor's compliance package",
		Long: `The compliance commands turn the audit log and custos's account of its own
safeguards (compliance/component-definition.json, docs/compliance.md) into
evidence an auditor can check without trusting the server.

Example:
  custos compliance report --data-dir ./data --dev --purpose HOPERAT --out ./q4-package --since 2026-10-01 --until 2027-01-01`,
	}
	return commandGroup(cmd, newComplianceReportCmd())
}

// Files of a compliance package.
const (
	packageBundle       = "bundle"
	packageReportJSON   = "report.json"
	packageReportHTML   = "report.html"
	packageVerification = "verification.txt"
)

func newComplianceReportCmd() *cobra.Command {
	var (
		dir, out, since, until, pubkey  string
		anchorDir, testResults, cfgPath string
		retention                       time.Duration
		dev, asJSON                     bool
		vf                              vaultFlags
		af                              accessFlags
	)
	cmd := &cobra.Command{
		Use:   "report --data-dir D --purpose CODE --out DIR [--since T] [--until U] [--pubkey FILE | --dev]",
		Short: "Write the auditor's package: a verified export bundle and a report of accesses, denials, break-glass, policies, keys, retention and controls",
		Long: `report writes the auditor's package for a period into the new directory DIR:

  DIR/bundle/          an export bundle of the period's records, the same as
                       'custos audit export --out' writes (records.jsonl, signed
                       checkpoints, proofs, CSV, FHIR AuditEvent, OCSF)
  DIR/report.html      one self-contained page (no script, nothing loaded from
                       anywhere) with charts: accesses per day by outcome and by
                       purpose of use, denials, break-the-glass
  DIR/report.json      the same data, with the record seqs behind every figure
  DIR/verification.txt the verification transcript

The period is [--since, --until): a record written at --since is in it, one
written at --until is not, and the bundle, report.json and report.html hold
the same records. A date alone is midnight UTC; for a local day give RFC 3339
with its offset (--since 2026-11-01T00:00:00-04:00), which also settles a
daylight saving change. A period holding no record is refused.

The report covers: accesses per patient (by lookup value, never the id) and
per user; denials and refusals; break-the-glass grants with their uses and
reviews (cross-checked with grants.db when present); the policy revisions and
bundle digests in force; the key versions used; the verification of the
whole log, of its anchored checkpoints and of the bundle; retention (the
configured period, the oldest record, records per month, and the proof that
nothing was deleted); and the status of each compliance/ control.

Every figure is counted from bundle/records.jsonl and names its records by
seq, so an auditor can recount it after checking the bundle with
'custos audit verify --bundle DIR/bundle --pubkey KEYS'. The bundle ends at
the latest signed checkpoint: records newer than it are left out (and the
report says which).

Reading the log is itself recorded: before anything is read, one access
record (action compliance/report, your OS account, --by, --purpose, the
period) is appended to the same hash-chained log, and everything is read as
of that record. The command works while serve runs (through D/admin.sock)
and when it does not (it then holds the audit log's lock itself). Its own
access record is newer than the latest signed checkpoint, so it is among
the records the package leaves out.

Controls are shown as passed only with --test-results FILE, the 'go test
-json' output of a full run (make test writes bin/test-results.json);
without it each control is "not checked in this package".

The checkpoint verifier keys come from --pubkey FILE ('custos audit pubkey'),
or are derived like 'audit pubkey' does: with --dev from the dev key file,
otherwise from Vault with the auditor policy. --anchor-dir A also checks the
log against A/checkpoints.jsonl; an A whose checkpoints.jsonl is missing or
holds no checkpoint is refused before the access record (no package): name
the anchor that holds them, or leave --anchor-dir out. verification.txt gives
each anchor file's own count of signed checkpoints (those whose signature
verifies with the keys; the others are named as failed, by line) and the
latest signed one's size and root. The retention period is
--audit-retention, or audit.retention of the serve configuration (--config).

The package is PHI: store it accordingly. The command exits 1 when a
verification failed; the package is still written and says what failed
(an anchor that forks from the log, a bundle that does not verify). A log
whose records do not recompute the checkpoint the bundle ends at (a record
changed in place) gets no package: no bundle of it can be written, and the
error names 'custos audit verify', which lists the broken records.

Exit status: 0 the package is written and every verification in it passed;
1 a verification failed (the package is written and says what failed), or
no package was written (the error says why); 2 bad usage. The package is put
in place after its summary is made, and taken back if the summary cannot be
printed (a closed pipe): then nothing is left in --out (a --out given empty
is empty again), and the exit is 1.

On a terminal, report draws its progress reading the log (records verified,
scanned and bundled), then checking the bundle offline (bytes of its files),
on stderr, not with --json; the package is the same either way.

` + vaultHelp + `

Examples:
  custos compliance report --data-dir ./data --dev --purpose HOPERAT --out ./package
  custos compliance report --data-dir /srv/custos --anchor-dir /mnt/audit-anchor/custos \
      --purpose HOPERAT --by privacy-officer \
      --pubkey custos-audit.vkeys --since 2026-10-01 --until 2027-01-01 \
      --test-results bin/test-results.json --config /etc/custos/custos.yaml --out ./q4-2026
  # then open ./package/report.html in a browser`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if out == "" {
				return usagef("--out DIR is required (a new or empty directory for the package)")
			}
			s, u, err := parseTimeRange(since, until)
			if err != nil {
				return err
			}
			if pubkey != "" && dev {
				return usagef("--pubkey and --dev both name the verifier keys: choose one")
			}
			ret, err := reportRetention(cmd, cfgPath, retention)
			if err != nil {
				return err
			}
			if err := existingFile(d.audit(), "audit log"); err != nil {
				return err
			}
			if err := emptyTarget(out); err != nil {
				return err
			}
			if err := notLink(out); err != nil {
				return err
			}
			if err := checkParentDir("--out", out); err != nil {
				return err
			}
			if err := af.check(access.ActionComplianceReport); err != nil {
				return err
			}
			p := packageRun{cmd: cmd, d: d, ask: af.ask(), out: out, since: s, until: u, retention: ret,
				anchorDir: anchorDir, testResults: testResults, pubkey: pubkey, dev: dev, asJSON: asJSON, vf: &vf}
			rep, err := p.run(cmd.Context())
			defer p.discard()
			if err != nil {
				return err
			}
			// The summary is made before the package is put in place,
			// and the package taken back if it cannot be printed: a
			// failed command leaves no package in --out.
			var summary bytes.Buffer
			if asJSON {
				err = writeJSON(&summary, packageSummary(out, rep))
			} else {
				printPackageSummary(&summary, out, rep)
			}
			if err != nil {
				return fmt.Errorf("package NOT written to %s: %w", out, err)
			}
			if err := p.publish(); err != nil {
				return notPublished(packageOutput, out, err)
			}
			if _, err := cmd.OutOrStdout().Write(summary.Bytes()); err != nil {
				if werr := p.withdraw(); werr != nil {
					return notTakenBack(packageOutput, out, err, werr)
				}
				return fmt.Errorf("package NOT written to %s (taken back): printing its summary: %w", out, err)
			}
			if !rep.Verification.OK || !rep.Retention.NothingDeleted.OK {
				return exitError{code: 1, err: fmt.Errorf("verification failed: the package in %s records what failed", out)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory holding audit.db and checkpoints.jsonl")
	f.StringVar(&out, "out", "", "write the package into this new directory (missing or empty; not a symbolic link)")
	f.StringVar(&since, "since", "", "first instant of the period, included (RFC 3339, or YYYY-MM-DD for midnight UTC; default: the first record)")
	f.StringVar(&until, "until", "", "instant to stop before, excluded (RFC 3339, or YYYY-MM-DD for midnight UTC; default: the latest signed checkpoint)")
	f.StringVar(&pubkey, "pubkey", "", "checkpoint verifier keys file ('custos audit pubkey'); default: derived from --dev or Vault")
	f.StringVar(&anchorDir, "anchor-dir", "", "also check the log against the checkpoints anchored here")
	f.StringVar(&testResults, "test-results", "", "'go test -json' results of a full run (bin/test-results.json): judge each control's evidence")
	f.DurationVar(&retention, "audit-retention", app.DefaultRetention, "the audit retention period to report (52596h: six years)")
	f.StringVar(&cfgPath, "config", "", "read audit.retention from this serve configuration file")
	f.BoolVar(&dev, "dev", false, "use the dev key file of a data directory served with --dev")
	f.BoolVar(&asJSON, "json", false, "print a summary of the package as JSON")
	af.register(f, purposeRequired)
	vf.register(f)
	markRequired(cmd, "data-dir", "out", "purpose")
	return cmd
}

// reportRetention is --audit-retention, or audit.retention of the
// configuration file when the flag was not given.
func reportRetention(cmd *cobra.Command, cfgPath string, flag time.Duration) (time.Duration, error) {
	if cmd.Flags().Changed("audit-retention") || cfgPath == "" {
		if flag <= 0 {
			return 0, usagef("--audit-retention must be more than 0, got %s", flag)
		}
		return flag, nil
	}
	file, err := config.Load(cfgPath)
	if err != nil {
		return 0, usageError{err}
	}
	o := app.Options{AuditRetention: durValue(file.Audit.Retention)}
	if o.AuditRetention < 0 {
		return 0, usagef("audit.retention in %s must be more than 0", cfgPath)
	}
	return o.Retention(), nil
}

func durValue(p *time.Duration) time.Duration {
	if p == nil {
		return 0
	}
	return *p
}

// emptyTarget refuses an existing, non-empty --out.
func emptyTarget(dir string) error {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return usagef("--out %s is a file, not a directory: give a new directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return usagef("--out %s is not empty: give a new directory", dir)
	}
	return nil
}

// notLink refuses an --out that is a symbolic link, before the access
// starts: the package or bundle is renamed into place at the end, and a
// rename replaces no link's target (durable.PublishDir refuses it), so
// over a link the command failed only after the access was recorded and
// the whole copy of the records taken (backup.CheckDest refuses one the
// same way). A link the user made is left as it is.
func notLink(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil // a missing --out is made; any other error is emptyTarget's
	}
	link, _ := os.Readlink(dir)
	return usagef("--out %s is a symbolic link (to %s), not a directory: name the directory itself", dir, link)
}

// output is what a command with --out DIR writes there, for the errors
// of a command that failed after putting it in place (notTakenBack).
type output struct {
	what     string // "backup", "bundle", "package"
	verified bool   // the command verified it before putting it in place
	check    string // how to check it, a format of its --out DIR
}

var (
	backupOutput  = output{what: "backup", verified: true, check: "'custos audit verify --data-dir COPY' on a copy of %s (docs/operations.md)"}
	bundleOutput  = output{what: "bundle", check: "'custos audit verify --bundle %s --pubkey FILE'"}
	packageOutput = output{what: "package", check: "'custos audit verify --bundle %s/" + packageBundle + " --pubkey FILE'"}
)

// notTakenBack is the error of a command that put its output o in place
// at out, then could not print its report (printErr), and could not take
// the output back either (werr, from Withdraw). When it is still at out
// (*partialdir.NotTakenBackError), the error says so: what is left and
// where, that it is complete (and verified), that it holds copies of PHI,
// and what to do. It names no record, only paths.
func notTakenBack(o output, out string, printErr, werr error) error {
	var left *partialdir.NotTakenBackError
	if !errors.As(werr, &left) {
		return fmt.Errorf("%s NOT written to %s: printing its report: %w; and taking it back did not complete: %v", o.what, out, printErr, werr)
	}
	return leftAt(o, out, fmt.Errorf("printing the report of %s %s: %w", o.what, out, printErr), left)
}

// notPublished is the error of a command whose output o could not be put
// in place at out (err, from Publish): "NOT written", unless Publish
// renamed it there and could not take it back (*partialdir.NotTakenBackError,
// a failed fsync then a failed rename back): then, as notTakenBack, it is
// LEFT at out.
func notPublished(o output, out string, err error) error {
	var left *partialdir.NotTakenBackError
	if !errors.As(err, &left) {
		return fmt.Errorf("%s NOT written to %s: %w", o.what, out, err)
	}
	return leftAt(o, out, fmt.Errorf("putting the %s in place at %s failed", o.what, out), left)
}

// leftAt is the error cause of a command that left its output o at out,
// complete (left says why it could not be taken back): what is left and
// where, that it holds copies of PHI, and what to do.
func leftAt(o output, out string, cause error, left *partialdir.NotTakenBackError) error {
	state := "complete"
	if o.verified {
		state = "complete and verified"
	}
	return fmt.Errorf("%w; the %s is LEFT at %s, %s, holding copies of PHI: it could not be taken back (%v). Remove it, or keep it and check it with "+o.check,
		cause, o.what, out, state, left.Err, out)
}

// packageRun is one run of 'compliance report'.
type packageRun struct {
	cmd                    *cobra.Command
	d                      dataDir
	ask                    access.Ask
	out                    string
	since, until           time.Time
	retention              time.Duration
	anchorDir, testResults string
	pubkey                 string
	dev                    bool
	asJSON                 bool // no progress bar
	vf                     *vaultFlags

	// The package's partial directory (run makes it; publish, withdraw
	// and discard).
	staged *partialdir.Staged
}

func (p *packageRun) step(format string, args ...any) {
	fmt.Fprintf(p.cmd.ErrOrStderr(), "compliance report: "+format+"\n", args...)
}

// run writes the package into a partial directory beside p.out (p.tmp),
// which publish renames into place once the caller has made its summary,
// and discard removes otherwise. The log is read once, through
// withAuditReader (a running server's admin socket, or this process under
// the log's lock): one access record (compliance/report), then the
// verification, the retention scan and the bundle of the view that ends
// at it (access.OpCompliance).
func (p *packageRun) run(ctx context.Context) (*report.Report, error) {
	req := access.ComplianceRequest{Ask: p.ask, Since: p.since, Until: p.until, Retention: p.retention}

	// --test-results is read first: a file that is missing or holds no
	// test result is refused before the access record is appended.
	controls, err := p.controls()
	if err != nil {
		return nil, err
	}

	// Anchored checkpoints: the latest names the origin of the keys that
	// check them.
	anchors := []*checkpoint.Anchor{{Dir: string(p.d)}}
	sources := []string{filepath.Join(string(p.d), checkpoint.FileName)}
	if p.anchorDir != "" {
		a := &checkpoint.Anchor{Dir: p.anchorDir}
		b, err := readAnchorFile(p.anchorDir)
		if err != nil {
			return nil, err
		}
		// Refused before anything is printed; the operation refuses
		// it too.
		if err := access.AskedAnchorHolds(b, a.Path()); err != nil {
			return nil, err
		}
		anchors = append(anchors, a)
		sources = append(sources, a.Path())
		req.Anchor, req.AnchorName = b, a.Path()
	}
	entries, err := checkpoint.Load(anchors...)
	if err != nil {
		return nil, fmt.Errorf("reading the anchored checkpoints: %w", err)
	}
	if len(entries) == 0 {
		return nil, errors.New("no signed checkpoint yet: a package needs one (serve signs one at least every --checkpoint-interval and at shutdown)")
	}
	if req.VerifierKeys, err = p.verifierKeys(entries[len(entries)-1]); err != nil {
		return nil, err
	}
	if _, err := checkpoint.ParseVerifierFile(req.VerifierKeys); err != nil {
		return nil, fmt.Errorf("verifier keys: %w", err)
	}

	// The package's partial directory (.OUT.partial-*, locked while this
	// runs): a killed report's, which holds copies of records, is removed
	// by the next report to the same --out, as a killed export's or
	// backup's is.
	staged, err := partialdir.Stage(p.out)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", p.out, err)
	}
	p.staged = staged
	tmp := staged.Dir()
	bdir := filepath.Join(tmp, packageBundle)
	p.step("verifying the audit log and its %d anchored checkpoints, scanning it for retention, writing the export bundle", len(entries))
	var res access.ComplianceResult
	progress, finish := auditProgress(p.cmd, p.asJSON, "reading the audit log")
	err = withAuditReader(p.cmd, p.d, func(r auditReader) error {
		_, err := r.DoProgress(ctx, access.OpCompliance, req, func(rd io.Reader) (err error) {
			res, err = access.ReadCompliance(rd, bdir)
			return err
		}, progress)
		return err
	})
	finish()
	if err != nil {
		return nil, err
	}
	m, err := readManifest(bdir)
	if err != nil {
		return nil, err
	}
	p.step("access recorded as record %d; the bundle holds records %d..%d", res.AccessSeq, m.From, m.To)
	v := res.Verification
	v.Anchors.Sources = strings.Join(sources, ", ")
	for i := range min(len(v.Anchors.Files), len(sources)) {
		v.Anchors.Files[i].Path = sources[i] // the server names its own path
	}

	p.step("verifying the bundle offline")
	tick, end := bytesProgress(progressTo(p.cmd, p.asJSON), "checking the bundle's files")
	tr, verr := bundle.VerifyProgress(bdir, req.VerifierKeys, tick)
	end()
	tr.Dir = packageBundle // the package's own, relative name
	if verr != nil && !errors.Is(verr, bundle.ErrInvalid) {
		return nil, verr
	}
	v.Bundle = &tr

	// The figures: from the bundle's records.jsonl.
	p.step("counting the bundle's records")
	b := report.NewBuilder()
	if err := readBundleRecords(filepath.Join(bdir, bundle.FileRecords), b.Add); err != nil {
		return nil, err
	}
	grants, err := grantsFile(filepath.Join(string(p.d), app.GrantsFile))
	if err != nil {
		return nil, err
	}
	rep, err := b.Build(report.Inputs{
		Generated: res.Now, Tool: "custos " + version, Since: p.since, Until: p.until,
		Bundle:       report.BundleRef{Dir: packageBundle, Manifest: m, NotCovered: res.NotCovered},
		Verification: v, Retention: res.Retention, PriorLoads: res.PolicyLoads, Controls: controls, Grants: grants,
	})
	if err != nil {
		return nil, err
	}

	var js, page bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		return nil, err
	}
	if err := rep.WriteHTML(&page); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		packageReportJSON: js.Bytes(), packageReportHTML: page.Bytes(), packageVerification: []byte(verificationText(rep)),
	} {
		if err := durable.WriteFile(filepath.Join(tmp, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// publish puts the package that run wrote in place: an empty --out is
// replaced, a non-empty one refused. On failure nothing is left (a
// rename done, its parent's fsync failed: taken back).
func (p *packageRun) publish() error { return p.staged.Publish(emptyTarget) }

// withdraw takes back the package publish put in place
// (partialdir.Staged.Withdraw; one renamed back but not removed is
// removed by discard), for a command that failed after it.
func (p *packageRun) withdraw() error { return p.staged.Withdraw() }

// discard removes the partial directory unless it was published, and
// releases its lock. Safe to call more than once, and before run made it.
func (p *packageRun) discard() {
	if p.staged != nil {
		p.staged.Discard()
	}
}

// verifierKeys reads --pubkey, or derives the keys of the latest
// checkpoint's origin as 'custos audit pubkey' does.
func (p *packageRun) verifierKeys(latest checkpoint.Entry) ([]byte, error) {
	if p.pubkey != "" {
		b, err := os.ReadFile(p.pubkey)
		if err != nil {
			return nil, fmt.Errorf("--pubkey: %w", err)
		}
		return b, nil
	}
	c, err := checkpoint.Parse(noteText(latest.Note))
	if err != nil {
		return nil, err
	}
	return verifierKeyFile(p.cmd, p.dev, p.d, p.vf, c.Origin)
}

// controls are the compliance/ controls, judged against --test-results
// when given.
func (p *packageRun) controls() (report.Controls, error) {
	def, err := compliance.Load()
	if err != nil {
		return report.Controls{}, err
	}
	if p.testResults == "" {
		return report.ControlsFrom(def, nil, ""), nil
	}
	res, err := compliance.ReadTestJSONFile(p.testResults)
	if err != nil {
		return report.Controls{}, err
	}
	if len(res) == 0 {
		return report.Controls{}, fmt.Errorf("--test-results %s holds no test result of %s: give the 'go test -json' output of a full run", p.testResults, compliance.ModulePath)
	}
	return report.ControlsFrom(def, res, filepath.Base(p.testResults)), nil
}

// readBundleRecords decodes each line of a bundle's records.jsonl and
// hands it to add, in order.
func readBundleRecords(path string, add func(audit.Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	line := 0
	for sc.Scan() {
		line++
		r, err := audit.Decode(sc.Bytes())
		if err != nil {
			return fmt.Errorf("%s line %d does not decode: %w", bundle.FileRecords, line, err)
		}
		if err := add(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// grantsFile reads grants.db for the break-glass cross-check; nil when
// the data directory has none.
func grantsFile(path string) ([]report.GrantFileEntry, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	gs, err := btg.New(path, btg.Options{}).All()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	out := make([]report.GrantFileEntry, 0, len(gs))
	for _, g := range gs {
		out = append(out, report.GrantFileEntry{ID: g.ID, Grantee: g.Sub, Tenant: g.Tenant, Created: g.Created, Expires: g.Expires,
			Revoked: g.Revoked, Uses: len(g.Uses), Reviews: len(g.Reviews)})
	}
	return out, nil
}

// verificationText is verification.txt: the checks of the live log and
// its anchors, then the bundle's transcript.
func verificationText(rep *report.Report) string {
	var b strings.Builder
	v := rep.Verification
	fmt.Fprintf(&b, "custos compliance report verification\n")
	fmt.Fprintf(&b, "generated: %s by %s\n\n", rep.Generated.Format(time.RFC3339), rep.Tool)
	status := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	fmt.Fprintf(&b, "audit log:  %s  %d records, head seq %d hash %s (hash chain, canonical encoding, seq continuity, time order, Merkle tree, head)\n",
		status(v.Log.OK), v.Log.Records, v.Log.HeadSeq, v.Log.HeadHash)
	for _, pr := range v.Log.Problems {
		fmt.Fprintf(&b, "  BROKEN %s\n", pr)
	}
	failed := ""
	if v.Anchors.Failed > 0 {
		failed = fmt.Sprintf(", %d failed the signature check", v.Anchors.Failed)
	}
	fmt.Fprintf(&b, "anchors:    %s  %d signed checkpoints%s (%s), latest size %d root %s\n",
		status(v.Anchors.OK), v.Anchors.Checkpoints, failed, v.Anchors.Sources, v.Anchors.LatestSize, v.Anchors.LatestRoot)
	for _, f := range v.Anchors.Files {
		noun := "signed checkpoints"
		if f.Checkpoints == 1 {
			noun = "signed checkpoint"
		}
		// Only checkpoints whose signature verified count as signed; the
		// others are named (until h-policy10 they were counted as signed
		// and could be the "latest").
		failed := ""
		if len(f.Failed) > 0 {
			failed = fmt.Sprintf(", %d failed the signature check (%s)", len(f.Failed), strings.Join(f.Failed, ", "))
		}
		// The root too: a fork between two anchors has the same size in
		// both files.
		root := ""
		if f.LatestRoot != "" {
			root = " root " + f.LatestRoot
		}
		latest := fmt.Sprintf("latest size %d%s", f.LatestSize, root)
		if f.Checkpoints == 0 {
			// Not "latest size 0", which reads as a checkpoint of the
			// empty tree.
			latest = "no checkpoint verified"
		}
		fmt.Fprintf(&b, "  %s: %d %s%s, %s\n", f.Path, f.Checkpoints, noun, failed, latest)
	}
	if v.Anchors.Error != "" {
		fmt.Fprintf(&b, "  %s\n", v.Anchors.Error)
		fmt.Fprintf(&b, "  cause: %s: %s\n", anchorCause(v.Anchors), anchorFailure(v.Anchors.Cause, reportKeys))
	}
	nd := rep.Retention.NothingDeleted
	fmt.Fprintf(&b, "retention:  %s  seqs 1..%d gapless=%v, tree size %d = head: %v, consistent with anchors: %v; period %s, oldest record %.2f days old\n\n",
		status(nd.OK), nd.LastSeq, nd.GaplessFromOne, nd.TreeSize, nd.TreeSizeEqualsHead, nd.AnchorsConsistent, rep.Retention.PeriodText, rep.Retention.OldestAgeDays)
	if v.Bundle != nil {
		b.WriteString(v.Bundle.Text())
	}
	return b.String()
}

// reportKeys names the verifier keys a report checked the anchors with
// (anchorFailure).
const reportKeys = "the verifier key set (--pubkey, or derived with --dev or from Vault)"

// anchorCause is a failed anchor check's cause, as audit verify --json
// names it: none (a server older than the field) is a mismatch.
func anchorCause(a report.AnchorCheck) string {
	if a.Cause == "" {
		return access.AnchorMismatch
	}
	return a.Cause
}

// anchorSummary is --json's "anchors": ok, and a failure's cause.
func anchorSummary(a report.AnchorCheck) map[string]any {
	m := map[string]any{"ok": a.OK}
	if a.Error != "" {
		m["cause"] = anchorCause(a)
	}
	return m
}

// packageSummary is --json's output.
func packageSummary(out string, rep *report.Report) map[string]any {
	return map[string]any{
		"out":    out,
		"files":  []string{packageBundle + "/", packageReportHTML, packageReportJSON, packageVerification},
		"period": rep.Period, "bundle": map[string]any{"from": rep.Bundle.Manifest.From, "to": rep.Bundle.Manifest.To, "not_covered": rep.Bundle.NotCovered},
		"records": rep.Summary.Records.Count, "accesses": rep.Summary.Accesses.Count, "denials": rep.Summary.Denials.Count,
		"refusals": rep.Summary.Refusals.Count, "refused_requests": rep.Summary.RefusedRequests, "break_glass_accesses": rep.Summary.BreakGlassAccesses.Count,
		"grants": len(rep.BreakGlass.Grants), "unreviewed_grants": rep.BreakGlass.Unreviewed,
		"patients": rep.Summary.Patients, "users": rep.Summary.Users,
		"verified": rep.Verification.OK, "nothing_deleted": rep.Retention.NothingDeleted.OK,
		"anchors":   anchorSummary(rep.Verification.Anchors),
		"retention": rep.Retention.Period, "oldest_record_age_days": rep.Retention.OldestAgeDays,
		"controls": map[string]any{"checked": rep.Controls.Checked, "passed": rep.Controls.Passed, "failed": rep.Controls.Failed, "not_checked": rep.Controls.NotChecked},
	}
}

func printPackageSummary(w io.Writer, out string, rep *report.Report) {
	verdict := "VERIFIED"
	if !rep.Verification.OK || !rep.Retention.NothingDeleted.OK {
		verdict = "VERIFICATION FAILED"
	}
	fmt.Fprintf(w, "compliance package %s: %s\n", out, verdict)
	if a := rep.Verification.Anchors; a.Error != "" {
		fmt.Fprintf(w, "  anchors FAILED (%s): %s\n", anchorCause(a), anchorFailure(a.Cause, reportKeys))
	}
	fmt.Fprintf(w, "  records %d..%d (%d), %s to %s\n", rep.Period.First.Seq, rep.Period.Last.Seq, rep.Summary.Records.Count,
		rep.Period.First.Time.Format(time.RFC3339), rep.Period.Last.Time.Format(time.RFC3339))
	if nc := rep.Bundle.NotCovered; nc != nil {
		fmt.Fprintf(w, "  records %d..%d are newer than the latest signed checkpoint and are not included\n", nc.From, nc.To)
	}
	fmt.Fprintf(w, "  %d accesses (%d denied), %d requests refused or failed closed (%d records), %d break-glass accesses under %d grants (%d unreviewed)\n",
		rep.Summary.Accesses.Count, rep.Summary.Denials.Count, rep.Summary.RefusedRequests, rep.Summary.Refusals.Count,
		rep.Summary.BreakGlassAccesses.Count, len(rep.BreakGlass.Grants), rep.BreakGlass.Unreviewed)
	fmt.Fprintf(w, "  retention %s: oldest record %.2f days old, %d records past it (custos deletes none)\n",
		rep.Retention.PeriodText, rep.Retention.OldestAgeDays, rep.Retention.PastRetention.Count)
	if rep.Controls.Checked {
		fmt.Fprintf(w, "  controls: %d with passing evidence, %d failed\n", rep.Controls.Passed, rep.Controls.Failed)
	} else {
		fmt.Fprintf(w, "  controls: %d not checked in this package (give --test-results)\n", rep.Controls.NotChecked)
	}
	fmt.Fprintf(w, "  open %s\n", filepath.Join(out, packageReportHTML))
}
