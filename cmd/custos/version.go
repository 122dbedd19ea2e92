package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion is what 'custos version' reports: the build information the
// Go toolchain embeds in every binary (runtime/debug.ReadBuildInfo), so the
// answer is true without any -ldflags step in the build.
type buildVersion struct {
	// Module is the main module's path; "" when the binary has no build
	// information.
	Module string `json:"module"`
	// Version is the main module's version: a release tag (v1.2.3), a
	// pseudo-version derived from the VCS revision by 'go build' in a
	// checkout (v0.0.0-20261124093000-0123456789ab, "+dirty" if modified),
	// or "(devel)" when the toolchain could not derive one ('go run', tests).
	Version string `json:"version"`
	// Revision and Time are the VCS commit the binary was built from and its
	// commit time (RFC 3339); "" when the build did not record them (built
	// outside a checkout, or with -buildvcs=false).
	Revision string `json:"vcs_revision,omitempty"`
	Time     string `json:"vcs_time,omitempty"`
	// Modified reports whether the checkout had uncommitted changes; nil
	// when the build did not record it.
	Modified *bool `json:"vcs_modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary (go1.26.8).
	GoVersion string `json:"go_version"`
}

// version is the module version of this binary, which serve reports as the
// MCP server's implementation version and demo as its clients'.
var version = readBuildVersion().Version

// readBuildVersion reads the build information of the running binary.
func readBuildVersion() buildVersion {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildVersion{Version: "(unknown)", GoVersion: "(unknown)"}
	}
	return versionOf(bi)
}

// versionOf extracts a buildVersion from build information.
func versionOf(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

// formatVersion is the text of 'custos version' and 'custos --version'.
func formatVersion(v buildVersion) string {
	var b strings.Builder
	fmt.Fprintf(&b, "custos %s\n", v.Version)
	if v.Module != "" {
		fmt.Fprintf(&b, "  module    %s\n", v.Module)
	}
	switch {
	case v.Revision == "":
		b.WriteString("  revision  unknown (built without VCS information)\n")
	case v.Modified == nil:
		fmt.Fprintf(&b, "  revision  %s\n", v.Revision)
	case *v.Modified:
		fmt.Fprintf(&b, "  revision  %s (modified: uncommitted changes)\n", v.Revision)
	default:
		fmt.Fprintf(&b, "  revision  %s (clean)\n", v.Revision)
	}
	if v.Time != "" {
		fmt.Fprintf(&b, "  time      %s\n", v.Time)
	}
	fmt.Fprintf(&b, "  go        %s\n", v.GoVersion)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the version, VCS revision and Go version this binary was built from",
		Long: `version prints what the Go toolchain recorded in the binary when it was
built: the module version, the VCS revision and its commit time, whether the
checkout had uncommitted changes, and the Go version. A binary built with
'go build' in a git checkout has all of them; 'go run' and 'go install
module@version' record less, and version says what is unknown.

Examples:
  custos version
  custos version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readBuildVersion()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), formatVersion(v))
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return cmd
}
