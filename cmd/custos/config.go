package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/cmd/custos/internal/config"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a configuration file for 'custos serve --config'",
		Long: `config works on the YAML file that 'custos serve --config FILE' reads
(commented example: docs/config.example.yaml).

Example:
  custos config check /etc/custos/custos.yaml`,
	}
	return commandGroup(cmd, newConfigCheckCmd())
}

// configReport is the --json output of config check.
type configReport struct {
	File     string             `json:"file"`
	Valid    bool               `json:"valid"`
	Problems []config.Problem   `json:"problems,omitempty"`
	Settings []config.Setting   `json:"settings,omitempty"`
	Notes    []string           `json:"notes,omitempty"`
	Summary  *configCheckDigest `json:"summary,omitempty"`
}

// configCheckDigest is the gist of the effective settings.
type configCheckDigest struct {
	Mode        string `json:"mode"`        // "production (Vault)" or "dev"
	Transport   string `json:"transport"`   // "stdio", "https" or "http"
	Identity    string `json:"identity"`    // "stdio principal", "dev tokens" or "oauth"
	Credentials string `json:"credentials"` // how Vault is logged in to (never the secret)
}

func newConfigCheckCmd() *cobra.Command {
	var asJSON, noFiles bool
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a serve configuration file and print the effective settings",
		Long: `check reads FILE as 'custos serve --config FILE' would, validates it as a
whole (every field known, values in range, combinations allowed, every file
and directory it names present, no secret in it), and prints the effective
settings: each field with its value and whether it came from the file or is
the default. No secret is printed; none can be in the file.

Exit status (as for every check: 'custos --help'):
  0  the file is valid
  1  problems found, each listed naming its field and line (serve would
     refuse to start)
  2  no verdict: bad usage, or FILE cannot be read (not found, permission
     denied, a directory)

--no-files skips the checks that the named files and directories exist,
for checking a file away from the host it is meant for.

Examples:
  custos config check /etc/custos/custos.yaml
  custos config check --no-files --json ./custos.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("config check needs exactly one FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			rep := configReport{File: path}
			var problems config.Problems
			collect := func(err error) {
				if err == nil {
					return
				}
				var ps config.Problems
				if errors.As(err, &ps) {
					problems = append(problems, ps...)
				} else {
					problems = append(problems, config.Problem{File: path, Message: err.Error()})
				}
			}
			file, err := config.Inspect(path)
			if p, ok := unreadConfig(err); ok {
				return errors.New(p.String()) // nothing checked: no verdict
			}
			collect(err)
			fs := newServeCmd().Flags()
			var eff *config.File
			if file != nil {
				var aerr error
				eff, aerr = config.Apply(fs, file)
				collect(aerr)
				if eff != nil {
					// The settings serve would run with: the file, and
					// every other flag at its default.
					all, serr := config.Snapshot(fs, eff)
					collect(serr)
					collect(all.Validate(config.Options{Complete: true, CheckFiles: !noFiles}))
				}
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if len(problems) > 0 {
				if asJSON {
					rep.Problems = problems
					if err := writeJSON(out, rep); err != nil {
						return err
					}
				} else {
					for _, p := range problems {
						fmt.Fprintf(errOut, "custos: %s\n", p)
					}
				}
				return problemsFound(fmt.Errorf("%s: %d problem(s); serve would refuse to start", path, len(problems)))
			}
			rep.Valid = true
			rep.Settings = config.Settings(fs, eff, os.Getenv)
			rep.Summary, rep.Notes = digest(fs)
			if asJSON {
				return writeJSON(out, rep)
			}
			fmt.Fprintf(out, "%s: valid\n", path)
			fmt.Fprintf(out, "mode: %s; transport: %s; identity: %s; Vault credentials: %s\n\n",
				rep.Summary.Mode, rep.Summary.Transport, rep.Summary.Identity, rep.Summary.Credentials)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIELD\tVALUE\tSOURCE\tFLAG")
			for _, s := range rep.Settings {
				v := s.Value
				if v == "" {
					v = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Field, v, s.Source, s.Flag)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, n := range rep.Notes {
				fmt.Fprintf(out, "\nnote: %s", n)
			}
			if len(rep.Notes) > 0 {
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON document on stdout")
	cmd.Flags().BoolVar(&noFiles, "no-files", false, "do not check that the files and directories named exist")
	return asCheck(cmd)
}

// unreadConfig is the problem of a configuration file that could not be
// read at all (config.Problem.Unread), if err is that.
func unreadConfig(err error) (config.Problem, bool) {
	var ps config.Problems
	if errors.As(err, &ps) && len(ps) == 1 && ps[0].Unread() {
		return ps[0], true
	}
	return config.Problem{}, false
}

// digest summarizes the effective serve flags; notes say what the file
// cannot show (the environment serve will read).
func digest(fs interface {
	GetBool(string) (bool, error)
	GetString(string) (string, error)
}) (*configCheckDigest, []string) {
	b := func(n string) bool { v, _ := fs.GetBool(n); return v }
	s := func(n string) string { v, _ := fs.GetString(n); return v }
	d := &configCheckDigest{Mode: "production (keys from Vault)", Transport: "stdio", Identity: "stdio principal", Credentials: "-"}
	var notes []string
	if b("dev") {
		d.Mode = "dev (ephemeral keys; every audit record says dev=true; never for real PHI)"
	}
	if s("listen") != "" {
		d.Transport = "http (plain; dev only)"
		if s("tls-cert") != "" {
			d.Transport = "https"
		}
		d.Identity = "dev tokens (" + s("tokens") + ")"
		if s("oauth-issuer") != "" {
			d.Identity = "OAuth 2.1 (" + s("oauth-issuer") + ")"
		}
	}
	if !b("dev") {
		if s("vault-role-id-file") != "" {
			d.Credentials = "AppRole (role and secret id read from files)"
		} else {
			d.Credentials = "token from $VAULT_TOKEN"
			state := "is not set here"
			if os.Getenv("VAULT_TOKEN") != "" {
				state = "is set here"
			}
			notes = append(notes, "serve reads the Vault token from $VAULT_TOKEN, which "+state+"; it never comes from the file")
		}
	}
	return d, notes
}
