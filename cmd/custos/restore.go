package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/secrets"
)

func newRestoreCmd() *cobra.Command {
	var (
		from, dir, pubkey, acceptRollback, purpose string
		anchors                                    []string
		dev, force, asJSON                         bool
		vf                                         vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "restore --from DIR --data-dir D [--anchor-dir A] [--pubkey FILE | --dev | Vault flags]",
		Short: "Restore a backup into a data directory, checked against the anchored checkpoints",
		Long: `restore checks the backup DIR ('custos backup') and restores it into D, all or
nothing: the files are staged beside D, checked as serve will check them, and
only then moved into place.

The backup is checked against every signed checkpoint anchored in D and in the
external anchor directory A (name it whenever serve runs with --anchor-dir:
an anchor left out is not checked). An A that is missing, or whose
checkpoints.jsonl is missing or holds no checkpoint while the backup or D has
some (not mounted, the wrong directory, emptied), is refused and nothing is
changed: the anchor asked for cannot be checked. Checkpoints at or below the
backup's head must match it (a fork is always refused). A larger one means the
backup is behind: records anchored since would be lost, and restore refuses,
unless you acknowledge it with --accept-rollback REASON. The restore then
records a 'backup/restore' audit record (the backup, its head, the anchored
size it is behind, your reason and OS account) in the restored log, signs a
checkpoint for it with a rollback acknowledgement, and anchors both in D and
A, so that serve accepts the restored log and every auditor sees the loss.
Every restore appends that record, behind or not.

Verifier keys come from --pubkey FILE ('custos audit pubkey'), or from the
keys: --dev (the backup's dev key file) or Vault with serve's credentials
(needed anyway to sign an acknowledgement). restore refuses while a server
holds D, and never replaces a non-empty D without --force (the old one is
kept as D.replaced-TIME).

On a terminal, restore draws the progress of each step on stderr (checking
the files, verifying the audit copy, copying, checking the restored log),
not with --json.

` + vaultHelp + `

Examples:
  custos restore --from /backup/custos-2026-11-30 --data-dir /var/lib/custos --anchor-dir /mnt/audit-anchor/custos --pubkey custos-audit.vkeys
  custos restore --from /backup/custos-2026-11-30 --data-dir /var/lib/custos --anchor-dir /mnt/audit-anchor/custos \
      --accept-rollback "disk failure INC-4711; audit.db lost since the backup"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return usagef("--from DIR (a backup) is required")
			}
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if dev && explicitVaultFlag(cmd.Flags()) != "" {
				return usagef("--%s cannot be combined with --dev", explicitVaultFlag(cmd.Flags()))
			}
			// The restore's record keeps --purpose for good: checked as the
			// access records' purpose is ("" is backup.Restore's HOPERAT).
			if purpose != "" {
				if err := checkAsk(access.Ask{Purpose: purpose}, backup.ActionRestore); err != nil {
					return err
				}
			}
			if c, err := admin.Dial(cmd.Context(), admin.Path(string(d))); err == nil {
				c.Close()
				return fmt.Errorf("%w: a server answers on %s; stop it first", backup.ErrServing, admin.Path(string(d)))
			}
			m, err := backup.ReadManifest(from)
			var origin string
			if err == nil {
				origin, err = backupOrigin(from, anchors)
			}
			if err != nil {
				return restoreRefused(err)
			}
			// The keys: opened once, for verifier keys (without --pubkey)
			// and to sign an acknowledgement.
			var keys signingKeys
			var closeKeys func()
			defer func() {
				if closeKeys != nil {
					closeKeys()
				}
			}()
			openKeys := func() (signingKeys, error) {
				if keys != nil {
					return keys, nil
				}
				k, c, err := openSigningKeys(cmd, dev, from, &vf)
				if err != nil {
					return nil, err
				}
				keys, closeKeys = k, c
				return k, nil
			}
			var verifiers note.Verifiers
			switch {
			case pubkey != "":
				verifiers, err = readVerifiers(pubkey)
			case origin == "":
				err = usagef("no checkpoint anchored yet: pass --pubkey FILE")
			default:
				var k signingKeys
				if k, err = openKeys(); err == nil {
					var vk []string
					if vk, err = checkpoint.VerifierKeys(origin, k, k.SigningVersions()...); err == nil {
						verifiers, err = checkpoint.ParseVerifierFile(checkpoint.FormatVerifierFile(vk))
					}
				}
			}
			if err != nil {
				return err
			}
			tick, done := stepProgress(cmd, asJSON)
			res, err := backup.Restore(cmd.Context(), backup.RestoreOptions{
				From: from, DataDir: string(d), Anchors: anchors, Verifiers: verifiers,
				AcceptRollback: acceptRollback, Force: force,
				Account: access.Self().Account, Purpose: purpose, Node: cliNode(),
				Progress: tick,
				Signer: func(origin string) (note.Signer, error) {
					k, err := openKeys()
					if err != nil {
						return nil, err
					}
					s, _, err := checkpoint.NewSigner(cmd.Context(), origin, k)
					return s, err
				},
			})
			done()
			if err != nil {
				return restoreRefused(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "OK: restored %s into %s (audit head %d, tree root %s)\n", from, d, m.Audit.HeadSeq, m.Audit.TreeRoot)
			fmt.Fprintf(out, "recorded: seq=%d action=%s\n", res.Record.Seq, backup.ActionRestore)
			if res.Behind != nil {
				fmt.Fprintf(out, "ROLLBACK ACKNOWLEDGED: the backup was behind the checkpoint of %d records; %d records are lost; the acknowledgement is signed and anchored\n",
					res.Behind.Size, res.Behind.Size-int64(m.Audit.HeadSeq))
			}
			if res.Replaced != "" {
				fmt.Fprintf(out, "the old data directory is kept at %s\n", res.Replaced)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "backup directory ('custos backup --out')")
	f.StringVar(&dir, "data-dir", "", "data directory to restore into (new or empty, or --force)")
	f.StringSliceVar(&anchors, "anchor-dir", nil, "external anchor directory of the server (repeatable); required when serve uses one")
	f.StringVar(&pubkey, "pubkey", "", "verifier keys file ('custos audit pubkey'); default: derived from the keys")
	f.StringVar(&acceptRollback, "accept-rollback", "", "restore although the backup is behind an anchored checkpoint; REASON is recorded and anchored")
	f.StringVar(&purpose, "purpose", "HOPERAT", "purpose of use of the restore's audit record (HL7 ActReason)")
	f.BoolVar(&force, "force", false, "replace a non-empty data directory (kept beside it as D.replaced-TIME)")
	f.BoolVar(&dev, "dev", false, "use the backup's dev key file (a data directory served with --dev)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	vf.register(f)
	markRequired(cmd, "from", "data-dir")
	return cmd
}

// restoreRefused is the error restore exits with: 1 when the backup does
// not verify.
func restoreRefused(err error) error {
	if errors.Is(err, backup.ErrUnverified) {
		return exitError{code: 1, err: fmt.Errorf("restore refused: the backup does not verify: %w", err)}
	}
	return fmt.Errorf("restore refused: %w", err)
}

// signingKeys is what restore needs of a secrets provider: the checkpoint
// signing key (to acknowledge a rollback) and its public versions.
type signingKeys interface {
	checkpoint.KeySigner
	SigningVersions() []int
}

// openSigningKeys opens the checkpoint signing keys: with dev the dev key
// file in the backup, otherwise Vault with serve's credentials.
func openSigningKeys(cmd *cobra.Command, dev bool, from string, vf *vaultFlags) (signingKeys, func(), error) {
	if dev {
		if err := existingFile(filepath.Join(from, secrets.DevKeyFile), "dev key file"); err != nil {
			return nil, nil, fmt.Errorf("%w: only a backup of a --dev data directory has one", err)
		}
		k, err := secrets.NewDev()
		if err == nil {
			err = k.PersistIn(from)
		}
		return k, func() {}, err
	}
	v, err := vf.open(cmd.Context(), quietLogger(cmd))
	if err != nil {
		return nil, nil, err
	}
	return v, func() { v.Close() }, nil
}

// backupOrigin is the checkpoints' origin: from the backup's latest
// checkpoint, else from an external anchor's; "" when none is anchored.
func backupOrigin(from string, anchors []string) (string, error) {
	es, err := backup.ReadCheckpoints(from)
	if err != nil {
		return "", err
	}
	for _, a := range anchors {
		e, ok, err := (&checkpoint.Anchor{Dir: a}).Latest()
		if err != nil {
			return "", err
		}
		if ok {
			es = append(es, e)
		}
	}
	if len(es) == 0 {
		return "", nil
	}
	c, err := checkpoint.Parse(noteText(es[len(es)-1].Note))
	if err != nil {
		return "", err
	}
	return c.Origin, nil
}
