package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/server"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage development bearer tokens for HTTP",
		Long: `Over HTTP, 'custos serve --tokens FILE' (with or without --dev) maps bearer
tokens to principals through a token file that stores only the SHA-256 of
each token; serve reads it as its own account (deploy/systemd: custos), so
install it root:custos 0640 (docs/operations.md). In production, serve
rather verifies OAuth 2.1 access tokens from the hospital's identity provider
('custos serve --oauth-issuer ... --oauth-audience ...'; docs/operations.md).

Give each token an expiry with --ttl: serve warns at start, outside --dev,
when its token file holds tokens that never expire. A serving custos reloads
the file within a second of a change (at once on SIGHUP): a token revoked
with 'custos token revoke' is refused from then on, and a subscription made
with it gets no further notification.

Examples:
  custos token new --principal ./synthetic/principals/clinician.json --tokens ./tokens.json --ttl 720h
  custos token list --tokens ./tokens.json
  custos token revoke --tokens ./tokens.json --id 3f2a9c1b`,
	}
	return commandGroup(cmd, newTokenNewCmd(), newTokenListCmd(), newTokenRevokeCmd())
}

func newTokenNewCmd() *cobra.Command {
	var principal, tokens string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "new --principal FILE --tokens FILE [--ttl DURATION]",
		Short: "Mint a random token for a principal and add its hash to a token file",
		Long: `new draws a random 256-bit token, appends its SHA-256 and the principal to
the token file (creating it with mode 0600; an existing file keeps its mode,
owner and group), and prints the token once on
stdout. The token is not stored anywhere: keep it in the client's secret store.

With --ttl the entry carries "expires_at" (now + ttl, whole seconds, UTC):
from then on serve refuses the token as it refuses an unknown one (401),
and its audit record reads http_401,invalid_token,expired. Without --ttl
(or --ttl 0) the token never expires; to rotate it, mint a new one and
revoke the old ('custos token revoke'). A serving custos picks the new token
up within a second (at once on SIGHUP).

Example:
  custos token new --principal ./synthetic/principals/clinician.json --tokens ./tokens.json --ttl 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if principal == "" || tokens == "" {
				return usagef("--principal and --tokens are both required")
			}
			if ttl < 0 {
				return usagef("--ttl %s: must not be negative (0 or absent: the token never expires)", ttl)
			}
			if _, err := server.LoadPrincipalFile(principal); err != nil {
				return fmt.Errorf("--principal %s: %w", principal, err)
			}
			if err := checkOutputFile("--tokens", tokens); err != nil {
				return err
			}
			p, err := os.ReadFile(principal)
			if err != nil {
				return err
			}
			var tf server.TokenFile
			// An existing file keeps its mode: installed root:custos 0640
			// for serve (docs/operations.md), rewritten 0600 it kept serve
			// out. (Its owner and group are kept by durable.WriteFile.)
			mode := os.FileMode(0o600)
			if fi, err := os.Stat(tokens); err == nil {
				mode = fi.Mode().Perm()
			}
			if data, err := os.ReadFile(tokens); err == nil {
				// Named, with nothing added to it: an existing file that
				// is not a token file is left as it is.
				if _, err := server.ParseTokenFile(data); err != nil {
					return fmt.Errorf("--tokens %s is not a token file (nothing written): %w", tokens, err)
				}
				if err := json.Unmarshal(data, &tf); err != nil {
					return fmt.Errorf("--tokens %s is not a token file (nothing written): %w", tokens, err)
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("--tokens: %w", err)
			}
			tok := randomToken()
			e := server.TokenEntry{TokenSHA256: server.HashToken(tok), Principal: json.RawMessage(compactJSON(p))}
			if ttl > 0 {
				e.ExpiresAt = time.Now().Add(ttl).UTC().Truncate(time.Second).Format(time.RFC3339)
			}
			tf.Tokens = append(tf.Tokens, e)
			data, err := json.MarshalIndent(tf, "", "  ")
			if err != nil {
				return err
			}
			if err := durable.WriteFile(tokenFileTarget(tokens), append(data, '\n'), mode); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "principal file (JSON: sub, roles, client_id, tenant, patients, purpose_of_use)")
	cmd.Flags().StringVar(&tokens, "tokens", "", "token file to create or extend")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the token verifies, e.g. 720h (0: it never expires)")
	markRequired(cmd, "principal", "tokens")
	return cmd
}

func compactJSON(b []byte) []byte {
	var v json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

// randomToken draws a 256-bit bearer token.
func randomToken() string {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}
