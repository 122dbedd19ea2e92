package e2e

import (
	csvpkg "encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

// TestAuditorsConcurrentlyBesideARollingServer: every auditor command, by
// four auditors at once and repeatedly, next to a server under read load
// that rolls its log (64 KiB segments): each command succeeds, every export
// and bundle is a prefix of the final log (nothing reordered, lost or
// duplicated across sealed segments), every bundle verifies, and no output
// or serve log line holds the token or a patient id.
func TestAuditorsConcurrentlyBesideARollingServer(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	anchor := t.TempDir()
	tok := newToken(t, d.principal("clinician"), tokens)
	clin := principalOf(t, d, "clinician")
	vkeys := filepath.Join(t.TempDir(), "vkeys")
	archive := t.TempDir()
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens,
		"--anchor-dir", anchor, "--checkpoint-interval", "50ms", "--node", "e2e",
		"--rate-limit", "0", "--audit-roll-size", "65536", "--audit-archive-dir", archive)
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "--origin", "custos.local/e2e/audit", "-o", vkeys)
	reads, stopLoad := readUnderLoad(t, s.url, tok, 3)
	waitFor(t, func() bool { return reads.Load() >= 40 })

	secrets := append([]string{tok}, clin.Patients...)
	check := func(what, out string) {
		for _, sec := range secrets {
			if sec != "" && strings.Contains(out, sec) {
				t.Errorf("%s: output holds a secret/patient id %.12s...", what, sec)
			}
		}
	}
	run := func(args ...string) (string, string, int) {
		out, errOut, code := custos(t, nil, args...)
		check(strings.Join(args[:2], " "), out+errOut)
		if code != 0 {
			t.Errorf("custos %v: exit %d\n%.2000s\n%.2000s", args, code, out, errOut)
		}
		return out, errOut, code
	}
	var mu sync.Mutex
	var exports []string
	var bundles []string
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 { // (w+i)%8 takes every case at least twice
				dir := t.TempDir()
				switch (w + i) % 8 {
				case 0:
					out, _, _ := run("audit", "verify", "--data-dir", d.data, "--json", "--pubkey", vkeys)
					var v struct {
						OK bool `json:"ok"`
					}
					if json.Unmarshal([]byte(out), &v); !v.OK {
						t.Errorf("verify not ok: %.3000s", out)
					}
					run("audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys)
				case 1:
					out, _, code := run("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
					if code != 0 {
						continue
					}
					mu.Lock()
					exports = append(exports, out)
					mu.Unlock()
					lines := strings.Split(strings.TrimSpace(out), "\n")
					for j, l := range lines {
						r, err := audit.Decode([]byte(l))
						if err != nil || r.Seq != uint64(j+1) {
							t.Errorf("jsonl line %d: seq %d %v", j+1, r.Seq, err)
							break
						}
						if j == len(lines)-1 && r.Action != "audit/export" {
							t.Errorf("jsonl last line %s", r.Action)
						}
					}
					csvOut, _, _ := run("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "csv", "--since", "2000-01-01T00:00:00Z")
					rows, err := csvpkg.NewReader(strings.NewReader(csvOut)).ReadAll()
					if err != nil {
						t.Errorf("csv: %v", err)
					}
					for j, row := range rows[1:] {
						if row[1] != fmt.Sprint(j+1) {
							t.Errorf("csv row %d: seq %s", j+1, row[1])
							break
						}
					}
				case 2:
					b := filepath.Join(dir, "b")
					run("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", b, "--formats", "csv,fhir,ocsf")
					if tr, _, _ := run("audit", "verify", "--bundle", b, "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
						t.Errorf("bundle: %s", tr)
					}
					rb, _ := os.ReadFile(filepath.Join(b, "records.jsonl"))
					mu.Lock()
					bundles = append(bundles, string(rb))
					mu.Unlock()
					b2 := filepath.Join(dir, "b2")
					run("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", b2, "--from-seq", "30", "--to-seq", "90")
					if tr, _, _ := run("audit", "verify", "--bundle", b2, "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
						t.Errorf("bundle 30..90: %s", tr)
					}
				case 3:
					run("audit", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--user", clin.Sub, "--json")
					run("audit", "report", "--data-dir", d.data, "--dev", "--purpose", "PATRQT", "--patient", clin.Patients[0], "--disclosures")
					run("audit", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--denials")
				case 4:
					pkg := filepath.Join(dir, "pkg")
					out, _, _ := run("compliance", "report", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys,
						"--purpose", "HOPERAT", "--out", pkg, "--json")
					var cp struct {
						Verified       bool `json:"verified"`
						NothingDeleted bool `json:"nothing_deleted"`
					}
					if json.Unmarshal([]byte(out), &cp); !cp.Verified || !cp.NothingDeleted {
						t.Errorf("compliance: %.3000s", out)
					}
					if tr, _, _ := run("audit", "verify", "--bundle", filepath.Join(pkg, "bundle"), "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
						t.Errorf("pkg bundle: %s", tr)
					}
				case 6:
					b := filepath.Join(dir, "bt")
					run("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", b, "--since", "2000-01-01", "--until", "2100-01-01")
					if tr, _, _ := run("audit", "verify", "--bundle", b, "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
						t.Errorf("bundle by time: %s", tr)
					}
				case 7:
					run("backup", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", filepath.Join(dir, "bk"))
					run("audit", "verify", "--data-dir", d.data, "--purpose", "HSYSADMIN")
				case 5:
					run("audit", "prove", "--data-dir", d.data, "--purpose", "HOPERAT", "--seq", fmt.Sprint(2+i*7), "--json")
					run("audit", "hash", clin.Patients[0], "--dev", "--purpose", "PATRQT", "--data-dir", d.data)
				}
			}
		})
	}
	wg.Wait()
	stopLoad()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	check("serve log", s.stderr.String())
	final, _, _ := run("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	for i, e := range exports {
		if !strings.HasPrefix(final, e[:len(e)-len(e[strings.LastIndex(strings.TrimSuffix(e, "\n"), "\n")+1:])]) {
			t.Errorf("export %d is not a prefix of the final export", i)
		}
	}
	for i, b := range bundles {
		if !strings.HasPrefix(final, b) {
			t.Errorf("bundle %d records are not a prefix of the final export", i)
		}
	}
	if len(exports) == 0 || len(bundles) == 0 {
		t.Fatalf("%d exports and %d bundles to check: the test would prove little", len(exports), len(bundles))
	}
	t.Logf("%d exports, %d bundles checked against the final %d bytes", len(exports), len(bundles), len(final))
	sealed, _ := filepath.Glob(filepath.Join(audit.SealedDir(filepath.Join(d.data, "audit.db")), "*"))
	archived, _ := filepath.Glob(filepath.Join(archive, "*"))
	if len(sealed)+len(archived) == 0 {
		t.Fatalf("the log never rolled (%d reads): the test would prove little", reads.Load())
	}
	t.Logf("%d reads, %d sealed and %d archived segment files", reads.Load(), len(sealed), len(archived))
}

// TestSecondServeBesideARollingServer: a second `custos serve` on the data
// directory of one that serves, under read load, and rolls its log every
// 64 KiB into an archive, is refused ("audit log is locked by another
// process"), every time, and the log the first one wrote verifies (the
// data set's cleanup) with every record it appended. The second used to
// wait for bbolt's lock on the live file's inode, get it when the first
// archived that file after sealing, take the running server's files for
// an interrupted seal and rename a new segment over the live one
// ("completing an interrupted seal"; then "segment N's seal is not its
// last record" and records missing between segments).
func TestSecondServeBesideARollingServer(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	archive := t.TempDir()
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--node", "e2e",
		"--rate-limit", "0", "--audit-roll-size", "65536", "--audit-archive-dir", archive)
	reads, stopLoad := readUnderLoad(t, s.url, tok, 2)
	waitFor(t, func() bool { return reads.Load() >= 40 })
	for i := range 4 {
		_, errOut, code := custos(t, nil, "serve", "--dev", "--data-dir", d.data, "--listen", loopback,
			"--tokens", tokens, "--node", "e2e", "--audit-archive-dir", archive)
		if code != 1 || !strings.Contains(errOut, "audit log is locked by another process") {
			t.Errorf("second serve %d: exit %d, want 1 and 'locked'\n%.2000s", i, code, errOut)
		}
		if strings.Contains(errOut, "interrupted seal") {
			t.Errorf("second serve %d touched the running server's segments:\n%.2000s", i, errOut)
		}
	}
	stopLoad()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	archived, _ := filepath.Glob(filepath.Join(archive, "*.db"))
	if len(archived) < 2 {
		t.Fatalf("%d segments archived while the second servers tried: the test would prove little", len(archived))
	}
	out := mustCustos(t, "audit", "verify", "--data-dir", d.data, "--json")
	var v struct {
		OK      bool `json:"ok"`
		Summary struct {
			Records int64 `json:"records"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || !v.OK {
		t.Fatalf("verify after the second servers: %v %.3000s", err, out)
	}
	// Every read was recorded: its record is in the log (a read's record
	// written to a segment file the second server renamed away is lost).
	if v.Summary.Records < reads.Load() {
		t.Errorf("%d records in the log for %d reads", v.Summary.Records, reads.Load())
	}
	t.Logf("%d reads, %d records, %d archived segments", reads.Load(), v.Summary.Records, len(archived))
}
