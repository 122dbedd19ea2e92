package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
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

// writeBundle is `audit export --out DIR`.
func writeBundle(cmd *cobra.Command, d dataDir, out, anchorDir string, fromSeq, toSeq uint64, since, until, formats string) error {
	anchorPath := filepath.Join(string(d), checkpoint.FileName)
	if anchorDir != "" {
		anchorPath = filepath.Join(anchorDir, checkpoint.FileName)
	}
	lines, err := anchorLines(anchorPath)
	if err != nil {
		return fmt.Errorf("reading checkpoints: %w (a bundle needs the signed checkpoints that serve writes)", err)
	}
	var fs []bundle.Format
	if formats != "" {
		for _, f := range strings.Split(formats, ",") {
			switch bundle.Format(f) {
			case bundle.FormatCSV, bundle.FormatFHIR, bundle.FormatOCSF:
				fs = append(fs, bundle.Format(f))
			default:
				return usagef("--formats: %q is not one of csv, fhir, ocsf", f)
			}
		}
	}
	log, err := audit.Open(d.audit(), audit.Options{ReadOnly: true})
	if err != nil {
		return lockHint(err)
	}
	defer log.Close()
	head, _ := log.Head()
	if since != "" || until != "" {
		if fromSeq != 0 || toSeq != 0 {
			return usagef("choose a seq range (--from-seq/--to-seq) or a time range (--since/--until), not both")
		}
		s, err := parseTime("since", since)
		if err != nil {
			return err
		}
		u, err := parseTime("until", until)
		if err != nil {
			return err
		}
		if fromSeq, toSeq, err = bundle.ResolveTimeRange(cmd.Context(), log, s, u); err != nil {
			return err
		}
	}
	if fromSeq == 0 {
		fromSeq = 1
	}
	if toSeq == 0 {
		toSeq = head
	}
	m, err := bundle.Write(cmd.Context(), out, log, bundle.WriteOptions{From: fromSeq, To: toSeq, Checkpoints: lines, Formats: fs})
	if err != nil {
		if errors.Is(err, bundle.ErrNoCheckpoint) {
			return fmt.Errorf("%w (serve signs one at least every --checkpoint-interval and at shutdown)", err)
		}
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "bundle %s: records %d..%d (%d), checkpoints at sizes %d and %d, origin %s\n",
		out, m.From, m.To, m.Records, m.Lower, m.Upper, m.Origin)
	return nil
}

func newAuditVerifyBundle(cmd *cobra.Command, dir, pubkey string, asJSON bool) error {
	if pubkey == "" {
		return usagef("--bundle needs --pubkey FILE (verifier keys, one per line: 'custos audit pubkey')")
	}
	keys, err := os.ReadFile(pubkey)
	if err != nil {
		return err
	}
	tr, err := bundle.Verify(dir, keys)
	if asJSON {
		if werr := writeJSON(cmd.OutOrStdout(), tr); werr != nil {
			return werr
		}
	} else {
		fmt.Fprint(cmd.OutOrStdout(), tr.Text())
	}
	if err != nil {
		if errors.Is(err, bundle.ErrInvalid) {
			return exitError{code: 1, err: fmt.Errorf("bundle verification failed: %d problem(s)", len(tr.Problems))}
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
	)
	cmd := &cobra.Command{
		Use:   "prove --data-dir D --seq N",
		Short: "Print an inclusion proof of one record against the latest signed checkpoint",
		Long: `prove shows that record N is in the audit log as anchored: it prints the
record's hash, its leaf hash, the latest signed checkpoint (origin, size, root,
signature) and the Merkle inclusion proof (RFC 6962) from the leaf to that
root. With --json the proof is machine-readable and can be checked offline
against the verifier keys (bundle.CheckInclusion).

A record newer than the latest checkpoint is not yet covered: wait for the
next one (serve signs at least every --checkpoint-interval).

Example:
  custos audit prove --data-dir ./data --seq 42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if seq == 0 {
				return usagef("--seq N is required (records are numbered from 1)")
			}
			entry, ok, err := (&checkpoint.Anchor{Dir: string(d)}).Latest()
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("no signed checkpoint yet in " + filepath.Join(string(d), checkpoint.FileName))
			}
			line, err := checkpoint.FormatLine(entry)
			if err != nil {
				return err
			}
			log, err := audit.Open(d.audit(), audit.Options{ReadOnly: true})
			if err != nil {
				return lockHint(err)
			}
			defer log.Close()
			in, err := bundle.InclusionProof(cmd.Context(), log, seq, line)
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
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory holding audit.db and checkpoints.jsonl")
	cmd.Flags().Uint64Var(&seq, "seq", 0, "the record to prove")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the proof as JSON")
	return cmd
}

func newAuditPubkeyCmd() *cobra.Command {
	var (
		dir, out, origin string
		dev              bool
		vf               vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "pubkey --data-dir D [--dev] [-o FILE]",
		Short: "Write the verifier keys of the audit checkpoints (for offline verification)",
		Long: `pubkey writes the note verifier keys ("origin+hash+key", one per signing key
version) that check the signatures on the audit log's checkpoints. Give the
file to auditors: 'custos audit verify --bundle DIR --pubkey FILE' needs it,
and nothing else from the server.

The origin is read from the latest checkpoint in D (or --origin). The public
keys come from Vault with the auditor policy, or with --dev from the data
directory's dev key file. Obtain the file over a channel you trust: a verifier
key is what makes a checkpoint's signature mean something.

` + vaultHelp + `

Example:
  custos audit pubkey --data-dir ./data --dev -o custos-audit.vkeys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if origin == "" {
				entry, ok, err := (&checkpoint.Anchor{Dir: string(d)}).Latest()
				if err != nil {
					return err
				}
				if !ok {
					return usagef("no checkpoint in %s yet: pass --origin", d)
				}
				c, err := checkpoint.Parse(noteText(entry.Note))
				if err != nil {
					return err
				}
				origin = c.Origin
			}
			data, err := verifierKeyFile(cmd, dev, d, &vf, origin)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			return writeFileAtomic(out, data, 0o644)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory holding checkpoints.jsonl")
	f.StringVar(&origin, "origin", "", "checkpoint origin (default: from the latest checkpoint)")
	f.StringVarP(&out, "output", "o", "", "write to FILE instead of stdout")
	f.BoolVar(&dev, "dev", false, "use the dev key file of a data directory served with --dev")
	vf.register(f)
	return cmd
}

// verifierKeyFile is the verifier key file of origin's checkpoints (one
// note verifier key per signing key version), from the auditor's keys:
// the dev key file with dev, otherwise Vault.
func verifierKeyFile(cmd *cobra.Command, dev bool, d dataDir, vf *vaultFlags, origin string) ([]byte, error) {
	k, closeKeys, err := openAuditorKeys(cmd, dev, d, vf)
	if err != nil {
		return nil, err
	}
	defer closeKeys()
	var vkeys []string
	for _, ver := range k.SigningVersions() {
		pub, _, err := k.PublicKey(ver)
		if err != nil {
			return nil, err
		}
		vk, err := note.NewEd25519VerifierKey(origin, pub)
		if err != nil {
			return nil, err
		}
		vkeys = append(vkeys, vk)
	}
	return checkpoint.FormatVerifierFile(vkeys), nil
}

// noteText is the body of a signed note (up to the blank line before the
// signatures).
func noteText(signed []byte) []byte {
	if i := bytes.Index(signed, []byte("\n\n")); i >= 0 {
		return signed[:i+1]
	}
	return signed
}
