package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// etcConfig matches a configuration file under /etc/custos.
var etcConfig = regexp.MustCompile(`/etc/custos/[A-Za-z0-9._-]+\.ya?ml`)

// TestHelpNamesTheInstalledConfigFile: every --help and document that
// names the serve configuration file under /etc/custos names the one the
// shipped systemd unit passes to 'custos serve --config'
// (deploy/systemd/custos.service), which docs/operations.md installs. config check's and compliance report's
// examples named /etc/custos/config.yaml, a file no install writes.
func TestHelpNamesTheInstalledConfigFile(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/custos.service")
	if err != nil {
		t.Fatal(err)
	}
	installed := etcConfig.FindAllString(string(unit), -1)
	if len(installed) != 1 {
		t.Fatalf("deploy/systemd/custos.service names %q, want one /etc/custos configuration file", installed)
	}
	want := installed[0]
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	named := 0
	eachCommand(root, func(cmd *cobra.Command) {
		for _, p := range etcConfig.FindAllString(cmd.Long+"\n"+cmd.Example, -1) {
			named++
			if p != want {
				t.Errorf("%s --help names %s; the systemd unit reads %s", cmd.CommandPath(), p, want)
			}
		}
	})
	if named == 0 {
		t.Fatal("no --help names an /etc/custos configuration file: is the walk broken?")
	}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range etcConfig.FindAllString(string(b), -1) {
			if p != want {
				t.Errorf("%s names %s; the systemd unit reads %s", strings.TrimPrefix(f, "../../"), p, want)
			}
		}
	}
}

// TestServeHelpSaysTheTokenFileIsReloaded: serve reloads its token file
// within a second of a change and at once on SIGHUP (server.TokenFile;
// 'custos token --help' and docs/operations.md, "Token files", say so),
// so serve --help says so too. It said the file was "read once, at start",
// which sends an operator who added a token to restart the server.
func TestServeHelpSaysTheTokenFileIsReloaded(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := root.Find([]string{"token"})
	if err != nil {
		t.Fatal(err)
	}
	const reload = "within a second of a change (at once on SIGHUP)"
	for _, c := range []*cobra.Command{serve, token} {
		if !strings.Contains(strings.Join(strings.Fields(c.Long), " "), reload) {
			t.Errorf("%s --help does not say the token file is reloaded %q", c.CommandPath(), reload)
		}
	}
	if strings.Contains(serve.Long, "read once") {
		t.Errorf("serve --help says the token file is read once")
	}
}

// unitPath is the one path of the systemd unit's line that starts with
// key (ReadWritePaths=, ExecStart=), matched by re.
func unitPath(t *testing.T, unit, key string, re *regexp.Regexp) string {
	t.Helper()
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, key) {
			if m := re.FindStringSubmatch(l); m != nil {
				return m[1]
			}
		}
	}
	t.Fatalf("deploy/systemd/custos.service: no %s line naming %s", key, re)
	return ""
}

// TestDocumentedPathsAreTheInstalledOnes: the anchor directory every
// document and --help example passes (--anchor-dir under /mnt) is the one
// the shipped systemd unit lets custos write (ReadWritePaths=), and the
// operations runbook's data directory is the unit's (--data-dir of
// ExecStart=). operations.md installed /var/lib/custos and
// /mnt/audit-anchor/custos, then ran its routine tasks, backup and restore
// on /srv/custos and /mnt/anchor/custos: a restore typed between its
// 'systemctl stop custos' and 'systemctl start custos' wrote a directory
// the service never reads, checked against an anchor that does not exist.
func TestDocumentedPathsAreTheInstalledOnes(t *testing.T) {
	b, err := os.ReadFile("../../deploy/systemd/custos.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	anchor := unitPath(t, unit, "ReadWritePaths=", regexp.MustCompile(`=(\S+)`))
	dataDir := unitPath(t, unit, "ExecStart=", regexp.MustCompile(`--data-dir (\S+)`))
	anchorArg := regexp.MustCompile(`--anchor-dir[ =](/mnt/\S*)`)
	dataDirArg := regexp.MustCompile(`--data-dir[ =](/\S*)`)
	check := func(where, text string, dataDirs bool) {
		for _, m := range anchorArg.FindAllStringSubmatch(text, -1) {
			if strings.TrimRight(m[1], "`,;)") != anchor {
				t.Errorf("%s: --anchor-dir %s; the systemd unit writes checkpoints to %s", where, m[1], anchor)
			}
		}
		if !dataDirs {
			return
		}
		for _, m := range dataDirArg.FindAllStringSubmatch(text, -1) {
			if p := strings.TrimRight(m[1], "`,;)"); p != dataDir && !strings.HasPrefix(p, "/tmp/") {
				t.Errorf("%s: --data-dir %s; the systemd unit serves %s", where, p, dataDir)
			}
		}
	}
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	eachCommand(root, func(cmd *cobra.Command) {
		check(cmd.CommandPath()+" --help", cmd.Long+"\n"+cmd.Example, false)
	})
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(strings.TrimPrefix(f, "../../"), string(b), strings.HasSuffix(f, "/operations.md"))
	}
}

// TestHelpOffersNoAdminGroupServeCannotSet: the admin socket admits the
// server's account and root, and also the gids of app.Options.Admin.Groups,
// which no serve flag (nor config key) sets (docs/audit-access.md). So no
// --help may send an operator to "a member of an admin group": policy
// status's did, for an account no deployment can admit.
func TestHelpOffersNoAdminGroupServeCannotSet(t *testing.T) {
	root := newRootCmd(new(bytes.Buffer), new(bytes.Buffer))
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	settable := false
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "admin") {
			settable = true
		}
	})
	if settable {
		t.Skip("serve has an admin flag: admin groups can be set, and help may name them")
	}
	eachCommand(root, func(cmd *cobra.Command) {
		if strings.Contains(strings.Join(strings.Fields(cmd.Long), " "), "admin group") {
			t.Errorf("%s --help names an admin group, which no serve flag or config key sets", cmd.CommandPath())
		}
	})
}
