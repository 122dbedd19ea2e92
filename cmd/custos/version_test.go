package main

import (
	"bytes"
	"encoding/json"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestFormatVersion formats build information as a release build, a
// checkout build with and without uncommitted changes, and a build that
// recorded no VCS information (go run, tests, -buildvcs=false).
func TestFormatVersion(t *testing.T) {
	info := func(version string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/custos-mcp/custos", Version: version},
			Settings:  append([]debug.BuildSetting{{Key: "-buildmode", Value: "exe"}}, settings...),
		}
	}
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "5fa81a93908a38345918f42bc49948705a731afa"},
			{Key: "vcs.time", Value: "2026-11-25T00:21:06Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		text string
		json string
	}{
		{
			name: "release",
			bi:   info("v1.4.0", vcs("false")...),
			text: `custos v1.4.0
  module    github.com/custos-mcp/custos
  revision  5fa81a93908a38345918f42bc49948705a731afa (clean)
  time      2026-11-25T00:21:06Z
  go        go1.26.8
`,
			json: `{"module":"github.com/custos-mcp/custos","version":"v1.4.0","vcs_revision":"5fa81a93908a38345918f42bc49948705a731afa","vcs_time":"2026-11-25T00:21:06Z","vcs_modified":false,"go_version":"go1.26.8"}`,
		},
		{
			name: "modified checkout",
			bi:   info("v0.0.0-20261125002106-5fa81a93908a+dirty", vcs("true")...),
			text: `custos v0.0.0-20261125002106-5fa81a93908a+dirty
  module    github.com/custos-mcp/custos
  revision  5fa81a93908a38345918f42bc49948705a731afa (modified: uncommitted changes)
  time      2026-11-25T00:21:06Z
  go        go1.26.8
`,
			json: `{"module":"github.com/custos-mcp/custos","version":"v0.0.0-20261125002106-5fa81a93908a+dirty","vcs_revision":"5fa81a93908a38345918f42bc49948705a731afa","vcs_time":"2026-11-25T00:21:06Z","vcs_modified":true,"go_version":"go1.26.8"}`,
		},
		{
			name: "no vcs information",
			bi:   info("(devel)"),
			text: `custos (devel)
  module    github.com/custos-mcp/custos
  revision  unknown (built without VCS information)
  go        go1.26.8
`,
			json: `{"module":"github.com/custos-mcp/custos","version":"(devel)","go_version":"go1.26.8"}`,
		},
		{
			name: "no main module version",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8"},
			text: `custos (devel)
  revision  unknown (built without VCS information)
  go        go1.26.8
`,
			json: `{"module":"","version":"(devel)","go_version":"go1.26.8"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionOf(tc.bi)
			if got := formatVersion(v); got != tc.text {
				t.Errorf("formatVersion:\n%s\nwant:\n%s", got, tc.text)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Errorf("JSON:\n%s\nwant:\n%s", got, tc.json)
			}
		})
	}
}

// TestVersionCommandPrintsGoVersion runs the real command: whatever else a
// test binary lacks, it knows the Go version that built it.
func TestVersionCommandPrintsGoVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("custos %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		if want := "  go        " + goruntime.Version() + "\n"; !strings.Contains(out.String(), want) {
			t.Errorf("custos %s printed:\n%s\nwant a line %q", strings.Join(args, " "), out.String(), want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("custos version --json: exit %d: %s", code, errb.String())
	}
	var v buildVersion
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("custos version --json: %v\n%s", err, out.String())
	}
	if v.GoVersion != goruntime.Version() || v.Version == "" || v.Version == "dev" {
		t.Errorf("custos version --json = %+v; want go_version %s and a module version", v, goruntime.Version())
	}
}
