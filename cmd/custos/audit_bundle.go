package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/internal/durable"
)

// anchorLines reads the raw lines of a checkpoint anchor file.
func anchorLines(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, checkpoint.MaxLineSize)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			out = append(out, bytes.Clone(sc.Bytes()))
		}
	}
	return out, sc.Err()
}

// writeBundle is `audit export --out DIR`: the bundle is written by the
// process that holds the log (withAuditReader) and unpacked into out.
func writeBundle(cmd *cobra.Command, d dataDir, ask access.Ask, out, anchorDir string, fromSeq, toSeq uint64, since, until, formats string, asJSON bool) error {
	req := access.BundleRequest{Ask: ask, From: fromSeq, To: toSeq}
	if anchorDir != "" {
		lines, err := anchorLines(filepath.Join(anchorDir, checkpoint.FileName))
		if err != nil {
			return fmt.Errorf("reading checkpoints: %w (a bundle needs the signed checkpoints that serve writes)", err)
		}
		req.Checkpoints = lines
	}
	if formats != "" {
		for _, f := range strings.Split(formats, ",") {
			switch bundle.Format(f) {
			case bundle.FormatCSV, bundle.FormatFHIR, bundle.FormatOCSF:
				req.Formats = append(req.Formats, bundle.Format(f))
			default:
				return usagef("--formats: %q is not one of csv, fhir, ocsf", f)
			}
		}
	}
	if since != "" || until != "" {
		if fromSeq != 0 || toSeq != 0 {
			return usagef("choose a seq range (--from-seq/--to-seq) or a time range (--since/--until), not both")
		}
		var err error
		if req.Since, req.Until, err = parseTimeRange(since, until); err != nil {
			return err
		}
	}
	// A target that cannot take the bundle is refused before the access
	// (and its record) starts, as compliance report does.
	if err := emptyTarget(out); err != nil {
		return err
	}
	if err := notLink(out); err != nil {
		return err
	}
	if err := checkParentDir("--out", out); err != nil {
		return err
	}
	if err := checkAsk(ask, access.ActionExport); err != nil {
		return err
	}
	// The directory that receives the bundle is made (beside out, locked)
	// before the access starts: a parent this account cannot write to, or
	// a read-only file system, was found only after the access record was
	// appended, named as the mkdir of a hidden directory.
	target, err := access.NewBundleTarget(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	defer target.Discard()
	m, err := fetchBundle(cmd, d, req, target, asJSON)
	if err != nil {
		if errors.Is(err, access.ErrBadRequest) && (fromSeq != 0 || toSeq != 0) {
			// The rest of a seq range's request was refused above: what
			// the log's writer refuses, before the access record, is a
			// range past the log's end ("to N: the log holds …"), named
			// by its flag.
			flag, n := "--to-seq", toSeq
			if toSeq == 0 {
				flag, n = "--from-seq", fromSeq
			}
			text := badRequestText(err)
			if _, holds, ok := strings.Cut(text, ": "); ok {
				text = holds
			}
			return usagef("%s %d: %s", flag, n, text)
		}
		if errors.Is(err, bundle.ErrNoCheckpoint) {
			return fmt.Errorf("%w (serve signs one at least every --checkpoint-interval and at shutdown)", err)
		}
		return err
	}
	// The report is made from the bundle before it is put in place, and
	// the bundle taken back if the report cannot be printed: a failed
	// command leaves no bundle (nor anything else) in --out.
	report, err := bundleReport(out, target.Dir(), m, asJSON)
	if err != nil {
		return fmt.Errorf("bundle NOT written to %s: %w", out, err)
	}
	if err := target.Publish(); err != nil {
		return notPublished(bundleOutput, out, err)
	}
	if _, err := cmd.OutOrStdout().Write(report); err != nil {
		if werr := target.Withdraw(); werr != nil {
			return notTakenBack(bundleOutput, out, err, werr)
		}
		return fmt.Errorf("bundle NOT written to %s (taken back): printing its report: %w", out, err)
	}
	return nil
}

// bundleReport is what 'audit export --out DIR' prints about the bundle
// received in dir (its partial directory), which goes to out: one line,
// or with asJSON the JSON document its --help describes.
func bundleReport(out, dir string, m bundle.Manifest, asJSON bool) ([]byte, error) {
	if !asJSON {
		return fmt.Appendf(nil, "bundle %s: records %d..%d (%d), checkpoints at sizes %d and %d, origin %s\n",
			out, m.From, m.To, m.Records, m.Lower, m.Upper, m.Origin), nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, bundle.FileManifest))
	if err != nil {
		return nil, err
	}
	signers, err := checkpointSigners(filepath.Join(dir, bundle.FileCheckpoints))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = writeJSON(&b, struct {
		Bundle         string `json:"bundle"`
		ManifestDigest string `json:"manifest"` // "sha256:" + hex of manifest.json
		bundle.Manifest
		SignedBy []string `json:"signed_by"`
	}{out, fmt.Sprintf("sha256:%x", sha256.Sum256(raw)), m, signers})
	return b.Bytes(), err
}

// takeBackFile is the error err of a command that wrote the file out and
// then failed: a file it created is removed (a failed command leaves
// nothing it created, as --out directories are taken back); one that
// existed before holds what the command wrote, and err says so. written
// is the file the command wrote (its FileInfo, taken right after): a file
// at out that is no longer it (another process replaced it since) is not
// the command's to remove, and is left.
func takeBackFile(out string, created bool, written os.FileInfo, err error) error {
	if !created {
		return fmt.Errorf("%w; %s existed before and now holds what this command wrote: left", err, out)
	}
	if fi, serr := os.Lstat(out); serr != nil || written == nil || !os.SameFile(fi, written) {
		return fmt.Errorf("%w; %s no longer holds the file this command wrote (replaced or removed since): left as it is", err, out)
	}
	if rerr := os.Remove(out); rerr != nil {
		return fmt.Errorf("%w; and removing the %s it wrote failed: %v", err, out, rerr)
	}
	if serr := durable.SyncDir(filepath.Dir(out)); serr != nil {
		return fmt.Errorf("%w; %s removed, but its removal is not confirmed durable: %v", err, out, serr)
	}
	return fmt.Errorf("%w; %s not written (removed)", err, out)
}

// checkpointSigners names the keys whose signatures the checkpoints in the
// anchor file path carry, as a verifier file names them ("origin+hash"),
// each once, in the order found. The signatures are not checked: the names
// say which verifier keys an auditor needs, 'audit verify --bundle' checks.
func checkpointSigners(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := checkpoint.ReadEntries(f, path)
	if err != nil {
		return nil, err
	}
	signers := []string{}
	for _, e := range entries {
		// No verifier: every signature is unverified, and listed.
		_, err := note.Open(e.Note, note.VerifierList())
		var unv *note.UnverifiedNoteError
		if !errors.As(err, &unv) {
			return nil, fmt.Errorf("%s: %w", e.Location(), err)
		}
		for _, sig := range unv.Note.UnverifiedSigs {
			if k := fmt.Sprintf("%s+%08x", sig.Name, sig.Hash); !slices.Contains(signers, k) {
				signers = append(signers, k)
			}
		}
	}
	return signers, nil
}

// fetchBundle receives the export bundle req asks for into target's
// partial directory (not yet in place: the caller publishes it) through
// withAuditReader (one access record, action req.Action or audit/export),
// and returns its manifest.
func fetchBundle(cmd *cobra.Command, d dataDir, req access.BundleRequest, target *access.BundleTarget, asJSON bool) (bundle.Manifest, error) {
	tick, done := auditProgress(cmd, asJSON, "writing the bundle")
	err := withAuditReader(cmd, d, func(r auditReader) error {
		_, err := r.DoProgress(cmd.Context(), access.OpBundle, req, func(rd io.Reader) error { return target.Read(rd) }, tick)
		return err
	})
	done()
	if err != nil {
		return bundle.Manifest{}, err
	}
	return readManifest(target.Dir())
}

// readManifest reads the manifest of the bundle in dir.
func readManifest(dir string) (bundle.Manifest, error) {
	var m bundle.Manifest
	b, err := os.ReadFile(filepath.Join(dir, bundle.FileManifest))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	return m, err
}

func newAuditVerifyBundle(cmd *cobra.Command, dir, pubkey string, asJSON bool) error {
	if pubkey == "" {
		return usagef("--bundle needs --pubkey FILE (verifier keys, one per line: 'custos audit pubkey')")
	}
	keys, err := os.ReadFile(pubkey)
	if err != nil {
		return fmt.Errorf("--pubkey: %w", err)
	}
	tick, end := bytesProgress(progressTo(cmd, asJSON), "checking the bundle's files")
	tr, err := bundle.VerifyProgress(dir, keys, tick)
	end()
	if errors.Is(err, bundle.ErrBadVerifierKey) {
		return fmt.Errorf("--pubkey %s: %w", pubkey, err)
	}
	if err != nil && !errors.Is(err, bundle.ErrInvalid) {
		// The verification did not run (no such directory, unusable keys):
		// no transcript, whose "FAILED: 0 problem(s)" would say it did.
		return fmt.Errorf("verifying bundle %s: %w", dir, err)
	}
	if asJSON {
		if werr := writeJSON(cmd.OutOrStdout(), tr); werr != nil {
			return werr
		}
	} else {
		fmt.Fprint(cmd.OutOrStdout(), tr.Text())
	}
	if err != nil {
		if errors.Is(err, bundle.ErrInvalid) {
			return problemsFound(fmt.Errorf("bundle verification failed: %d problem(s)", len(tr.Problems)))
		}
		return err
	}
	return nil
}

func newAuditProveCmd() *cobra.Command {
	var (
		dir    string
		seq    uint64
		asJSON bool
		af     accessFlags
	)
	cmd := &cobra.Command{
		Use:   "prove --data-dir D --purpose CODE --seq N",
		Short: "Print an inclusion proof of one record against the latest signed checkpoint",
		Long: `prove shows that record N is in the audit log as anchored: it prints the
record's hash, its leaf hash, the latest signed checkpoint (origin, size, root,
signature) and the Merkle inclusion proof (RFC 6962) from the leaf to that
root. With --json the proof is machine-readable and can be checked offline
against the verifier keys (bundle.CheckInclusion).

A record newer than the latest checkpoint is not yet covered: wait for the
next one (serve signs at least every --checkpoint-interval). A --seq past
the log's end is refused (exit 2) before anything is recorded, naming the
records the log holds.

Example:
  custos audit prove --data-dir ./data --purpose HOPERAT --seq 42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if seq == 0 {
				return usagef("--seq N is required (records are numbered from 1)")
			}
			if err := af.check(access.ActionProve); err != nil {
				return err
			}
			var in bundle.Inclusion
			err = withAuditReader(cmd, d, func(r auditReader) error {
				_, err := r.Do(cmd.Context(), access.OpProve, access.ProveRequest{Ask: af.ask(), Seq: seq}, func(rd io.Reader) error {
					b, err := io.ReadAll(rd)
					if err == nil {
						in, err = bundle.ParseInclusion(b)
					}
					return err
				})
				return err
			})
			if errors.Is(err, access.ErrBadRequest) {
				// --purpose, --by and --seq 0 were refused above: what
				// the log's writer refuses, before the access record, is
				// a --seq past the log's end ("seq N: the log holds …").
				return usagef("--%s", badRequestText(err))
			}
			if err != nil {
				return err
			}
			if asJSON {
				b, err := in.JSON()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(append(b, '\n'))
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), in.Text())
			return nil
		},
	}
	af.register(cmd.Flags(), purposeRequired)
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory holding audit.db and checkpoints.jsonl")
	cmd.Flags().Uint64Var(&seq, "seq", 0, "the record to prove")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the proof as JSON")
	markRequired(cmd, "data-dir", "purpose", "seq")
	return cmd
}

func newAuditPubkeyCmd() *cobra.Command {
	var (
		dir, out, origin string
		dev, asJSON      bool
		vf               vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "pubkey --data-dir D [--dev] [-o FILE] [--json]",
		Short: "Write the verifier keys of the audit checkpoints (for offline verification)",
		Long: `pubkey writes the note verifier keys ("origin+hash+key", one per signing key
version) that check the signatures on the audit log's checkpoints. Give the
file to auditors: 'custos audit verify --bundle DIR --pubkey FILE' needs it,
and nothing else from the server.

The origin is read from the latest checkpoint in D (or --origin). The public
keys come from Vault with the auditor policy, or with --dev from the data
directory's dev key file. Obtain the file over a channel you trust: a verifier
key is what makes a checkpoint's signature mean something.

The file holds key lines only (docs/audit-format.md): no version or label,
so that any note verifier reads it. --json prints each key on stdout with
its signing key version and the name audit records give that version
("key_id", e.g. signing=transit/custos-audit-signing@2), and which is the
latest (the one that signs new checkpoints); with -o the file is written as
without --json. Validity periods are not known to custos: Vault keeps them.

` + vaultHelp + `

Examples:
  custos audit pubkey --data-dir ./data --dev -o custos-audit.vkeys
  custos audit pubkey --data-dir ./data --dev -o custos-audit.vkeys --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if out != "" && out != "-" {
				if err := checkOutputFile("-o", out); err != nil {
					return err
				}
			}
			if origin == "" {
				entry, ok, err := (&checkpoint.Anchor{Dir: string(d)}).Latest()
				if err != nil {
					return err
				}
				if !ok {
					host, _ := os.Hostname()
					return usagef("no checkpoint in %s yet (serve signs its first once records arrive): pass --origin <deployment>/<node>/audit "+
						"as serve names it from --deployment (default %s) and --node (default the host name), e.g. %s/%s/audit",
						d, app.DefaultDeployment, app.DefaultDeployment, host)
				}
				c, err := checkpoint.Parse(noteText(entry.Note))
				if err != nil {
					return err
				}
				origin = c.Origin
			}
			keys, err := verifierKeys(cmd, dev, d, &vf, origin)
			if err != nil {
				return err
			}
			data := verifierFile(keys)
			if out == "" || out == "-" {
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), pubkeyJSON{Origin: origin, Keys: keys})
				}
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			var summary bytes.Buffer
			if asJSON {
				if err := writeJSON(&summary, pubkeyJSON{Origin: origin, Keys: keys}); err != nil {
					return err
				}
			}
			_, statErr := os.Lstat(out)
			created := errors.Is(statErr, os.ErrNotExist)
			if err := durable.WriteFile(out, data, 0o644); err != nil {
				var unsynced *durable.UnsyncedError
				if errors.As(err, &unsynced) { // in place, complete: say so
					return &unconfirmedError{path: out, dir: unsynced.Dir, err: unsynced.Err}
				}
				return err
			}
			if !asJSON {
				return nil
			}
			written, _ := os.Lstat(out) // to know it again (takeBackFile); nil: not removed
			if _, err := cmd.OutOrStdout().Write(summary.Bytes()); err != nil {
				return takeBackFile(out, created, written, fmt.Errorf("printing the keys written to -o %s: %w", out, err))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory holding checkpoints.jsonl")
	f.StringVar(&origin, "origin", "", "checkpoint origin <deployment>/<node>/audit (default: from the latest checkpoint)")
	f.StringVarP(&out, "output", "o", "", "write to FILE instead of stdout")
	f.BoolVar(&dev, "dev", false, "use the dev key file of a data directory served with --dev")
	f.BoolVar(&asJSON, "json", false, "print each key with its version and key id as JSON on stdout (the -o file is unchanged)")
	vf.register(f)
	markRequired(cmd, "data-dir")
	return cmd
}

// pubkeyJSON is 'audit pubkey --json'.
type pubkeyJSON struct {
	Origin string        `json:"origin"`
	Keys   []verifierKey `json:"keys"`
}

// verifierKey is one line of the verifier key file and what it stands
// for, which the file does not say.
type verifierKey struct {
	Version     int    `json:"version"`      // the signing key's version
	KeyID       string `json:"key_id"`       // as audit records name it (signing=…@N)
	Latest      bool   `json:"latest"`       // the version that signs new checkpoints
	VerifierKey string `json:"verifier_key"` // the file's line: origin+hash+base64(0x01||pubkey)
}

// verifierKeyFile is the verifier key file of origin's checkpoints
// (verifierKeys, one line each).
func verifierKeyFile(cmd *cobra.Command, dev bool, d dataDir, vf *vaultFlags, origin string) ([]byte, error) {
	keys, err := verifierKeys(cmd, dev, d, vf, origin)
	if err != nil {
		return nil, err
	}
	return verifierFile(keys), nil
}

// verifierFile is the file of keys: key lines only.
func verifierFile(keys []verifierKey) []byte {
	vkeys := make([]string, len(keys))
	for i, k := range keys {
		vkeys[i] = k.VerifierKey
	}
	return checkpoint.FormatVerifierFile(vkeys)
}

// verifierKeys are the note verifier keys of origin's checkpoints, one per
// signing key version, ascending, from the auditor's keys: the dev key
// file with dev, otherwise Vault.
func verifierKeys(cmd *cobra.Command, dev bool, d dataDir, vf *vaultFlags, origin string) ([]verifierKey, error) {
	k, closeKeys, err := openAuditorKeys(cmd, dev, d, vf)
	if err != nil {
		return nil, err
	}
	defer closeKeys()
	_, latest, err := k.PublicKey(0)
	if err != nil {
		return nil, err
	}
	var keys []verifierKey
	for _, ver := range k.SigningVersions() {
		pub, _, err := k.PublicKey(ver)
		if err != nil {
			return nil, err
		}
		vk, err := note.NewEd25519VerifierKey(origin, pub)
		if err != nil {
			return nil, err
		}
		keys = append(keys, verifierKey{Version: ver, KeyID: k.SigningKeyID(ver), Latest: ver == latest, VerifierKey: vk})
	}
	return keys, nil
}

// noteText is the body of a signed note (up to the blank line before the
// signatures).
func noteText(signed []byte) []byte {
	if i := bytes.Index(signed, []byte("\n\n")); i >= 0 {
		return signed[:i+1]
	}
	return signed
}
