package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/server"
)

// tokenIDLen is how many hex digits of a token's SHA-256 name it in
// 'custos token list'; --id takes any unique prefix of tokenIDMin or more.
const (
	tokenIDLen = 12
	tokenIDMin = 8
)

// tokenRow is what 'custos token list' shows of an entry: who it stands
// for and until when, never the token (the file does not hold it) and
// never the patients (their count only).
type tokenRow struct {
	Index     int      `json:"index"`
	ID        string   `json:"id"`
	Sub       string   `json:"sub"`
	Roles     []string `json:"roles"`
	Tenant    string   `json:"tenant"`
	ClientID  string   `json:"client_id"`
	Purpose   string   `json:"purpose_of_use"`
	Patients  int      `json:"patients"`
	ExpiresAt string   `json:"expires_at,omitempty"`
	State     string   `json:"state"` // active, expired or no_expiry
}

// readTokenRows reads a token file as 'custos serve' would (a file serve
// refuses is refused, naming the problem) and describes its entries.
func readTokenRows(path string, now time.Time) (server.TokenFile, []tokenRow, error) {
	var tf server.TokenFile
	data, err := os.ReadFile(path)
	if err != nil {
		return tf, nil, fmt.Errorf("--tokens: %w", err)
	}
	if _, err := server.ParseTokenFile(data); err != nil {
		return tf, nil, fmt.Errorf("--tokens %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &tf); err != nil {
		return tf, nil, fmt.Errorf("--tokens %s: %w", path, err)
	}
	rows := make([]tokenRow, len(tf.Tokens))
	for i, e := range tf.Tokens {
		id, err := e.Identity()
		if err != nil {
			return tf, nil, fmt.Errorf("--tokens %s: tokens[%d]: %w", path, i, err)
		}
		exp, err := e.Expires()
		if err != nil {
			return tf, nil, fmt.Errorf("--tokens %s: tokens[%d].expires_at: %w", path, i, err)
		}
		state := "active"
		switch {
		case exp.IsZero():
			state = "no_expiry"
		case !now.Before(exp):
			state = "expired"
		}
		rows[i] = tokenRow{
			Index: i, ID: strings.ToLower(e.TokenSHA256[:tokenIDLen]), Sub: id.Principal.Sub,
			Roles: id.Principal.Roles, Tenant: id.Principal.Tenant, ClientID: id.Principal.ClientID,
			Purpose: id.PurposeOfUse, Patients: len(id.Principal.Patients), ExpiresAt: e.ExpiresAt, State: state,
		}
	}
	return tf, rows, nil
}

func printTokenRows(w io.Writer, rows []tokenRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUB\tROLES\tTENANT\tCLIENT\tPURPOSE\tPATIENTS\tEXPIRES\tSTATE")
	for _, r := range rows {
		exp := r.ExpiresAt
		if exp == "" {
			exp = "never"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Sub, strings.Join(r.Roles, ","),
			r.Tenant, r.ClientID, r.Purpose, r.Patients, exp, r.State)
	}
	return tw.Flush()
}

func newTokenListCmd() *cobra.Command {
	var tokens string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list --tokens FILE [--json]",
		Short: "List a token file's tokens: who each stands for and until when",
		Long: `list shows each entry of a token file: its id (the first 12 hex digits of
the token's SHA-256, which 'custos token revoke --id' takes), the principal
it stands for (sub, roles, tenant, client, purpose of use, how many patients
it names), when it expires and whether it is active, expired or without an
expiry. The tokens themselves are not in the file and cannot be shown.

Example:
  custos token list --tokens ./tokens.json --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, rows, err := readTokenRows(tokens, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			return printTokenRows(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().StringVar(&tokens, "tokens", "", "token file to read")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the entries as a JSON array")
	markRequired(cmd, "tokens")
	return cmd
}

func newTokenRevokeCmd() *cobra.Command {
	var (
		tokens, sub    string
		ids            []string
		expired, stdin bool
		dryRun, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "revoke --tokens FILE (--id ID... | --sub SUB | --expired | --token-stdin) [--dry-run] [--json]",
		Short: "Remove tokens from a token file; a serving custos refuses them within a second",
		Long: `revoke removes the selected entries from a token file, writing it anew in one
step (a new file renamed over the old; its mode, owner and group kept;
through a symbolic link, over the file the link names, the link kept). A
serving custos reloads the file within a second (at once on SIGHUP): from
then on the revoked tokens are refused as unknown ones (401), and a
subscription made with one gets no further notification (its notify record
reads token_revoked).

Select entries with any of:
  --id ID         an id from 'custos token list' (any unique prefix of 8 or
                  more hex digits, or the whole SHA-256); repeatable
  --sub SUB       every token of a principal
  --expired       every token past its expires_at
  --token-stdin   the token itself, read from standard input (a leaked
                  token: revoke it without looking it up)
Nothing matched, an ambiguous prefix, or a selection that would leave the
file without any token (serve refuses such a file: mint the replacement
first) changes nothing and exits 1. --dry-run says what would go.

Examples:
  custos token revoke --tokens ./tokens.json --id 3f2a9c1b
  printf %s "$LEAKED" | custos token revoke --tokens ./tokens.json --token-stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(ids) == 0 && sub == "" && !expired && !stdin {
				return usagef("say which tokens to revoke: --id, --sub, --expired or --token-stdin")
			}
			for _, id := range ids {
				if len(id) < tokenIDMin || len(id) > 64 {
					return usagef("--id %q: want %d to 64 hex digits (an id from 'custos token list')", id, tokenIDMin)
				}
				if _, err := hex.DecodeString(id + strings.Repeat("0", len(id)%2)); err != nil {
					return usagef("--id %q: want hex digits (an id from 'custos token list')", id)
				}
			}
			var leaked string
			if stdin {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && err != io.EOF {
					return fmt.Errorf("--token-stdin: %w", err)
				}
				if leaked = strings.TrimSpace(line); leaked == "" {
					return usagef("--token-stdin: standard input holds no token")
				}
			}
			tf, rows, err := readTokenRows(tokens, time.Now())
			if err != nil {
				return err
			}
			drop := make([]bool, len(rows))
			for _, id := range ids {
				var hit []int
				for i, e := range tf.Tokens {
					if strings.HasPrefix(strings.ToLower(e.TokenSHA256), strings.ToLower(id)) {
						hit = append(hit, i)
					}
				}
				switch len(hit) {
				case 0:
					return fmt.Errorf("--id %s: no token of %s has this id; nothing written", id, tokens)
				case 1:
					drop[hit[0]] = true
				default:
					return fmt.Errorf("--id %s: %d tokens of %s have ids starting so: give more digits; nothing written", id, len(hit), tokens)
				}
			}
			matched := len(ids) > 0
			for i, r := range rows {
				hit := (sub != "" && r.Sub == sub) || (expired && r.State == "expired") ||
					(leaked != "" && strings.EqualFold(tf.Tokens[i].TokenSHA256, server.HashToken(leaked)))
				drop[i] = drop[i] || hit
				matched = matched || hit
			}
			if !matched {
				return fmt.Errorf("no token of %s matched (%s); nothing written", tokens, revokeSelection(sub, expired, stdin))
			}
			var gone []tokenRow
			var keep []server.TokenEntry
			for i, e := range tf.Tokens {
				if drop[i] {
					gone = append(gone, rows[i])
				} else {
					keep = append(keep, e)
				}
			}
			if len(keep) == 0 {
				return fmt.Errorf("revoking %d token(s) would leave %s without any token, and serve refuses such a file: mint the replacement first ('custos token new'); nothing written", len(gone), tokens)
			}
			if !dryRun {
				mode := os.FileMode(0o600)
				if fi, err := os.Stat(tokens); err == nil {
					mode = fi.Mode().Perm()
				}
				tf.Tokens = keep
				data, err := json.MarshalIndent(tf, "", "  ")
				if err != nil {
					return err
				}
				if err := durable.WriteFile(tokenFileTarget(tokens), append(data, '\n'), mode); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, struct {
					DryRun    bool       `json:"dry_run"`
					Revoked   []tokenRow `json:"revoked"`
					Remaining int        `json:"remaining"`
				}{dryRun, gone, len(keep)})
			}
			verb := "revoked"
			if dryRun {
				verb = "would revoke (--dry-run: nothing written)"
			}
			fmt.Fprintf(out, "%s %d token(s); %d remain in %s\n", verb, len(gone), len(keep), tokens)
			if err := printTokenRows(out, gone); err != nil {
				return err
			}
			if !dryRun {
				fmt.Fprintln(cmd.ErrOrStderr(), "a serving custos refuses them within a second (at once on SIGHUP)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tokens, "tokens", "", "token file to change")
	cmd.Flags().StringSliceVar(&ids, "id", nil, "id of a token to revoke (from 'custos token list'; a unique prefix of 8+ hex digits); repeatable")
	cmd.Flags().StringVar(&sub, "sub", "", "revoke every token of this principal (sub)")
	cmd.Flags().BoolVar(&expired, "expired", false, "revoke every token past its expires_at")
	cmd.Flags().BoolVar(&stdin, "token-stdin", false, "read the token to revoke from standard input")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be revoked; write nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	markRequired(cmd, "tokens")
	return cmd
}

// tokenFileTarget is the file path names, through any symbolic links (path
// itself when it names none, or nothing yet). 'custos token new' and
// 'revoke' write the new file there, so that a serve reading it by either
// name sees the change and the link stays; renamed over the link, the new
// file left the linked one, and a serve reading that, holding a token
// 'revoke' said it had revoked.
func tokenFileTarget(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// revokeSelection names the selectors given, for an error.
func revokeSelection(sub string, expired, stdin bool) string {
	var s []string
	if sub != "" {
		s = append(s, "--sub "+sub)
	}
	if expired {
		s = append(s, "--expired")
	}
	if stdin {
		s = append(s, "--token-stdin")
	}
	return strings.Join(slices.Clip(s), ", ")
}
