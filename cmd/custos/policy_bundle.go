package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	vault "github.com/hashicorp/vault/api"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
)

// bundleSigner is the signer of --key ID=PEMFILE or, with --vault, the
// Vault Transit policy key (token from $VAULT_TOKEN).
func bundleSigner(cmd *cobra.Command, key string, useVault bool) (policy.JWSSigner, error) {
	switch {
	case key != "" && useVault:
		return nil, usagef("choose --key ID=PEMFILE or --vault, not both")
	case useVault:
		addr := os.Getenv("VAULT_ADDR")
		if addr == "" {
			return nil, usagef("--vault needs $VAULT_ADDR and $VAULT_TOKEN (a token with policy custos-policy-signer)")
		}
		o := secrets.VaultOptions{Address: addr, Token: os.Getenv("VAULT_TOKEN"), Logger: quietLogger(cmd)}
		if ca := os.Getenv("VAULT_CACERT"); ca != "" {
			o.TLS = &vault.TLSConfig{CACert: ca}
		}
		s, err := secrets.OpenPolicySigner(cmd.Context(), o)
		if err != nil {
			return nil, fmt.Errorf("vault: %w", err)
		}
		return s, nil
	case key != "":
		return parseSigningKey(key)
	}
	return nil, usagef("a signing key is required: --key ID=PEMFILE or --vault")
}

// parseSigningKey reads --key ID=PEMFILE (an ECDSA P-256 private key).
func parseSigningKey(kv string) (*policy.FileSigner, error) {
	id, file, ok := strings.Cut(kv, "=")
	if !ok || id == "" || file == "" {
		return nil, usagef("--key %q: want ID=PEMFILE (an ECDSA P-256 private key; the ID names it to verifiers)", kv)
	}
	s, err := policy.NewFileSigner(id, file)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", kv, err)
	}
	return s, nil
}

const policyKeyHelp = `Keys: ES256 (ECDSA P-256). With --vault the Transit key custos-policy-signing
signs (the private key never leaves Vault; the token needs policy
custos-policy-signer) and servers verify with --policy-key-vault. Or create a
file pair with
  openssl ecparam -name prime256v1 -genkey -noout -out policy-signing.pem
  openssl ec -in policy-signing.pem -pubout -out policy-signing.pub.pem
keep the private key with the security team, and give servers the public key:
  custos serve ... --policy-bundle policy.tar.gz --policy-key security-team-2026=policy-signing.pub.pem`

func newPolicyBundleCmd() *cobra.Command {
	var (
		out, key, revision string
		useVault, asJSON   bool
		sequence           uint64
	)
	cmd := &cobra.Command{
		Use:   "bundle DIR -o FILE (--key ID=PEMFILE | --vault) --sequence N [--revision R] [--json]",
		Short: "Build a signed OPA bundle from a policy directory (for rollout)",
		Long: `bundle compiles DIR with the server's lock-down, runs its Rego tests (a
policy that fails them is not bundled), packs the .rego files (tests
included: servers run them again at load) into an OPA bundle, signs it with
the key (.signatures.json, ES256) and writes FILE. Roll it out by replacing
the file a server's --policy-bundle names (write it next to that file and
rename it over: mv, not cp, so the server never reads it half written): the
server verifies the signature, runs the tests and swaps it in (or rejects it
and keeps serving the old one).

` + bundleOutputHelp + `

` + sequenceHelp + `

` + policyKeyHelp + `

Examples:
  custos policy bundle ./policy -o policy.tar.gz --sequence 42 --key security-team-2026=policy-signing.pem
  custos policy bundle ./policy -o policy.tar.gz --sequence 42 --key security-team-2026=policy-signing.pem --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("bundle takes exactly one policy DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("bundle needs -o FILE")
			}
			if err := checkOutputFile("-o", out); err != nil {
				return err
			}
			if _, _, err := policyFS(args[0]); err != nil {
				return err
			}
			signer, err := bundleSigner(cmd, key, useVault)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("sequence") {
				return usagef("bundle needs --sequence N (from 1 to %d, higher than every bundle rolled out before; see docs/policy.md, rollback protection)", uint64(policy.MaxSequence))
			}
			b, err := policy.BuildBundle(cmd.Context(), args[0], revision)
			if err != nil {
				return err
			}
			if err := policy.SetBundleSequence(b, sequence); err != nil {
				return usageError{err}
			}
			return signAndWrite(cmd, b, signer, written{Bundle: out, Source: args[0]}, asJSON, nil)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle file to write")
	cmd.Flags().StringVar(&key, "key", "", "ID=PEMFILE: the ECDSA P-256 signing key")
	cmd.Flags().StringVar(&revision, "revision", "", "manifest revision (default: the policy revision, sha256 of the modules)")
	cmd.Flags().Uint64Var(&sequence, "sequence", 0, "signed sequence claim (manifest metadata.custos.sequence): servers refuse a bundle that does not advance the last one loaded")
	cmd.Flags().BoolVar(&useVault, "vault", false, "sign with the Vault Transit key custos-policy-signing ($VAULT_ADDR, $VAULT_TOKEN)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was written as JSON")
	markRequired(cmd, "output", "sequence")
	return cmd
}

func newPolicySignCmd() *cobra.Command {
	var (
		out, key         string
		useVault, asJSON bool
		sequence         uint64
	)
	cmd := &cobra.Command{
		Use:   "sign BUNDLE -o FILE (--key ID=PEMFILE | --vault) [--sequence N] [--json]",
		Short: "Re-sign an existing policy bundle (e.g. with a new key)",
		Long: `sign reads BUNDLE (its old signature is not trusted), checks that its
policy compiles and passes its tests, and writes it signed with the key to
FILE. Its sequence claim is kept, or replaced with --sequence N.

` + bundleOutputHelp + `

` + sequenceHelp + `

` + policyKeyHelp + `

Examples:
  custos policy sign policy.tar.gz -o policy-2027.tar.gz --sequence 43 --key security-team-2027=policy-signing-2027.pem
  custos policy sign policy.tar.gz -o policy-2027.tar.gz --sequence 43 --key security-team-2027=policy-signing-2027.pem --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("sign takes exactly one BUNDLE file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("sign needs -o FILE")
			}
			if err := checkOutputFile("-o", out); err != nil {
				return err
			}
			signer, err := bundleSigner(cmd, key, useVault)
			if err != nil {
				return err
			}
			switch {
			case !cmd.Flags().Changed("sequence"):
				sequence = 0
				fmt.Fprintln(cmd.ErrOrStderr(), "custos: keeping the bundle's sequence claim: a server that loaded the original refuses this re-signed bundle (same claim, another digest); give --sequence N above it to roll it out there")
			case sequence == 0:
				return usagef("--sequence must be from 1 to %d", uint64(policy.MaxSequence))
			}
			return resignBundle(cmd, args[0], signer, out, sequence, asJSON)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle file to write")
	cmd.Flags().StringVar(&key, "key", "", "ID=PEMFILE: the ECDSA P-256 signing key")
	cmd.Flags().BoolVar(&useVault, "vault", false, "sign with the Vault Transit key custos-policy-signing ($VAULT_ADDR, $VAULT_TOKEN)")
	cmd.Flags().Uint64Var(&sequence, "sequence", 0, "replace the signed sequence claim (manifest metadata.custos.sequence)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was written as JSON")
	markRequired(cmd, "output")
	return cmd
}

const sequenceHelp = `Rollback protection: the sequence claim (manifest metadata.custos.sequence)
is signed with the manifest. A server refuses a bundle whose claim is lower
than the last bundle it loaded, equal to it for another bundle, or missing
once a bundle with a claim has loaded. Give each rollout a higher number
(e.g. a counter kept with the signing key, or YYYYMMDDNN). opa build
--signing-key writes the same claim from a .manifest holding
{"metadata":{"custos":{"sequence":N}}}.`

// bundleOutputHelp is the output and exit status of policy bundle and sign.
const bundleOutputHelp = `Output: one line on stdout, 'wrote FILE: revision R, sequence N, digest
sha256:…, signed by KEY'; warnings go to stderr. --json prints instead
{"bundle", "source", "digest", "revision", "key", "sequence"} for a rollout
pipeline: the file written, the DIR or BUNDLE it was made from, the SHA-256
of the file ("sha256:" + hex, the digest 'policy verify' and a server
report), the manifest revision, the signing key id and the sequence claim
(0: none). Nothing is printed on stdout when it fails.

Exit status (the root help's rule, 'custos --help'): 0 written; 1 not
written, the error says why (a policy that does not compile or fails its
tests, a DIR, BUNDLE or key that cannot be read, a FILE that cannot be
written); 2 bad usage (flags, arguments, an -o FILE whose directory does
not exist), nothing written.`

// written is what policy bundle and policy sign wrote, their --json.
type written struct {
	Bundle   string `json:"bundle"`   // the file written (-o)
	Source   string `json:"source"`   // the policy DIR or BUNDLE it was made from
	Digest   string `json:"digest"`   // "sha256:" + hex of the file
	Revision string `json:"revision"` // manifest revision
	Key      string `json:"key"`      // signing key id
	Sequence uint64 `json:"sequence"` // the signed sequence claim; 0: none
}

// resignBundle is custos policy sign: it reads the bundle at in without
// trusting its signature, sets its sequence claim to sequence unless 0,
// signs it with signer and writes it to out.
func resignBundle(cmd *cobra.Command, in string, signer policy.JWSSigner, out string, sequence uint64, asJSON bool) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	b, err := policy.ReadUnverifiedBundle(f)
	f.Close()
	if err != nil {
		return err
	}
	if sequence != 0 {
		if err := policy.SetBundleSequence(b, sequence); err != nil {
			return usageError{err}
		}
	}
	// Before signing, whatever the signer: no signature for a policy every
	// server would reject. (With --vault there is no local key to run the
	// round trip below with.)
	if err := policy.CheckBundle(cmd.Context(), b); err != nil {
		return err
	}
	// The re-signed bundle must load as a server would load it.
	return signAndWrite(cmd, b, signer, written{Bundle: out, Source: in}, asJSON, func(data []byte) error {
		tmp, err := os.CreateTemp("", "custos-bundle-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		tmp.Write(data)
		tmp.Close()
		fs, ok := signer.(*policy.FileSigner)
		if !ok {
			return nil // Vault: the server checks with the keys it reads from Vault
		}
		if _, _, err := policy.LoadBundle(cmd.Context(), tmp.Name(), []policy.VerificationKey{fs.VerificationKey()}, policy.Options{}); err != nil {
			return fmt.Errorf("the re-signed bundle does not load: %w", err)
		}
		return nil
	})
}

// signAndWrite signs b, serializes it, runs check (if any) on the bytes,
// writes them to w.Bundle atomically and prints what it wrote (w, with
// the rest filled in), as JSON with asJSON.
func signAndWrite(cmd *cobra.Command, b *bundle.Bundle, signer policy.JWSSigner, w written, asJSON bool, check func([]byte) error) error {
	out := w.Bundle
	if err := policy.SignBundle(cmd.Context(), b, signer); err != nil {
		return err
	}
	var buf bytes.Buffer
	digest, err := policy.WriteBundle(&buf, b)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(buf.Bytes()); err != nil {
			return err
		}
	}
	if err := durable.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	seq, err := policy.BundleSequence(b)
	if err != nil {
		return err
	}
	if asJSON {
		w.Digest, w.Revision, w.Key, w.Sequence = digest, b.Manifest.Revision, signer.KeyID(), seq
		return writeJSON(cmd.OutOrStdout(), w)
	}
	claim := "no sequence claim"
	if seq != 0 {
		claim = fmt.Sprintf("sequence %d", seq)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: revision %s, %s, digest %s, signed by %s\n", out, b.Manifest.Revision, claim, digest, signer.KeyID())
	return nil
}

func newPolicyVerifyCmd() *cobra.Command {
	var (
		keys   []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "verify BUNDLE --key ID=PUBPEM...",
		Short: "Verify a policy bundle as a server loads it and show its rollback claim",
		Long: `verify loads BUNDLE exactly as serve --policy-bundle does (signature checked
against the public keys given, archive checked, policy compiled, its Rego
tests run) and prints its digest, revision, signing key and sequence claim.
It does not read a server's high-water mark: a server refuses a bundle whose
sequence is not above the last one it loaded (docs/policy.md, rollback
protection). --json prints {"bundle", "verified", "digest", "revision", "key",
"sequence"} (sequence 0: no claim) for a rollout pipeline.

Exit status (as for every check: 'custos --help'):
  0  verified: a server would load this bundle (its sequence aside)
  1  problems found, named: the signature does not verify with the keys
     given, the file is not a policy bundle custos accepts (larger than
     32 MiB included), the policy does not compile or its tests fail
  2  no verdict: bad usage, BUNDLE cannot be read, or a --key file cannot
     be read or holds no usable key

A bundle signed with --vault names its key version (signed by
vault:transit/custos-policy-signing@v2): give that version's public key
under that id, read from Vault (vault read -format=json
transit/keys/custos-policy-signing | jq -r '.data.keys["2"].public_key').

Examples:
  custos policy verify policy.tar.gz --key security-team-2026=policy-signing.pub.pem
  custos policy verify policy.tar.gz --key security-team-2026=policy-signing.pub.pem --json
  custos policy verify policy.tar.gz --key vault:transit/custos-policy-signing@v2=v2.pub.pem`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("verify takes exactly one BUNDLE file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keys) == 0 {
				return usagef("verify needs --key ID=PUBPEM (repeatable): the keys a server would trust")
			}
			vks, err := parseVerificationKeys(keys)
			if err != nil {
				return err
			}
			_, info, err := policy.LoadBundle(cmd.Context(), args[0], vks, policy.Options{})
			if err != nil {
				var ce *policy.CandidateError
				if errors.As(err, &ce) && (ce.Digest != "" || errors.Is(err, policy.ErrBundleTooLarge)) {
					// The bundle was read (up to MaxBundleSize): what is
					// wrong is in it.
					return problemsFound(err)
				}
				return err // no bundle read, or no usable key: no verdict
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					Bundle   string `json:"bundle"`
					Verified bool   `json:"verified"`
					Digest   string `json:"digest"`
					Revision string `json:"revision"`
					Key      string `json:"key"`
					Sequence uint64 `json:"sequence"`
				}{args[0], true, info.Digest, info.Revision, info.KeyID, info.Sequence})
			}
			claim := "none (refused by a server once a bundle with a claim has loaded)"
			if info.Sequence != 0 {
				claim = fmt.Sprintf("%d", info.Sequence)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: verified\n  digest    %s\n  revision  %s\n  key       %s\n  sequence  %s\n",
				args[0], info.Digest, info.Revision, info.KeyID, claim)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "ID=PUBPEM: an ES256 public key a server trusts (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was verified as JSON")
	markRequired(cmd, "key")
	return asCheck(cmd)
}

// parseVerificationKeys reads the --key ID=PUBPEM flags of verify and
// impact: the ES256 public keys a server trusts.
func parseVerificationKeys(keys []string) ([]policy.VerificationKey, error) {
	var vks []policy.VerificationKey
	for _, kv := range keys {
		id, file, ok := strings.Cut(kv, "=")
		if !ok || id == "" || file == "" {
			return nil, usagef("--key %q: want ID=PUBPEM (an ECDSA P-256 public key)", kv)
		}
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--key %s: %w", kv, err)
		}
		k, err := policy.ParseVerificationKey(id, pem)
		if err != nil {
			return nil, fmt.Errorf("--key %s: %w", kv, err)
		}
		vks = append(vks, k)
	}
	return vks, nil
}
