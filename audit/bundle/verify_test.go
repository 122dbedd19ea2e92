package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// writeTestBundle exports records 11..40 of a real 50-record log, with
// checkpoints at 10 (lower) and 45 (upper).
func writeTestBundle(t *testing.T, l *audit.Log, k testKey) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	ck := checkpoints(t, k, l, 10, 45, 50)
	if _, err := Write(context.Background(), dir, l, WriteOptions{From: 11, To: 40, Checkpoints: ck, Formats: []Format{FormatCSV}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func problemSet(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		s := fmt.Sprintf("%d/%s", p.Seq, p.Check)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// editLines rewrites records.jsonl line by line (0-based line i is seq 11+i).
func editLines(t *testing.T, dir string, f func(lines [][]byte) [][]byte) {
	t.Helper()
	p := filepath.Join(dir, FileRecords)
	b := mustRead(t, p)
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	lines = f(lines)
	out := append(bytes.Join(lines, []byte("\n")), '\n')
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func line(seq int) int { return seq - 11 }

// editJSON rewrites a JSON file of the bundle.
func editJSON[T any](t *testing.T, path string, f func(*T)) {
	t.Helper()
	var v T
	if err := json.Unmarshal(mustRead(t, path), &v); err != nil {
		t.Fatal(err)
	}
	f(&v)
	b, _ := json.Marshal(v)
	os.WriteFile(path, b, 0o600)
}

func TestVerifyTamper(t *testing.T) {
	l := openRealLog(t, 50)
	k := newTestKey(t, testOrigin, 1)
	vkeys := []byte("# test key\n" + k.vkey + "\n")
	other := newTestKey(t, testOrigin, 2)

	clean := writeTestBundle(t, l, k)
	if tr, err := Verify(clean, vkeys); err != nil || !tr.OK || len(tr.Problems) != 0 {
		t.Fatalf("clean bundle: %v\n%s", err, tr.Text())
	}

	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		vkeys  []byte
		want   []string // "seq/check", sorted
	}{
		{"byte changed, still canonical", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte {
				ls[line(20)] = bytes.Replace(ls[line(20)], []byte("user-"), []byte("usex-"), 1)
				return ls
			})
		}, nil, []string{"0/completeness", "0/manifest", "20/derived", "21/chain"}},
		{"byte changed, not canonical", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte {
				ls[line(20)] = bytes.Replace(ls[line(20)], []byte(`"seq":20`), []byte(`"seq":020`), 1)
				return ls
			})
		}, nil, []string{"0/completeness", "0/manifest", "20/canonical", "21/chain"}},
		{"last record changed", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte {
				ls[line(40)] = bytes.Replace(ls[line(40)], []byte("user-"), []byte("usex-"), 1)
				return ls
			})
		}, nil, []string{"0/completeness", "0/manifest", "40/derived"}},
		{"line deleted", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte { return slices.Delete(ls, line(25), line(25)+1) })
		}, nil, []string{"0/completeness", "0/manifest", "25/sequence", "26/chain", "26/derived", "26/sequence"}},
		{"first line deleted", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte { return ls[1:] })
		}, nil, []string{"0/completeness", "0/manifest", "11/sequence", "12/derived", "12/sequence"}},
		{"lines swapped", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte {
				ls[line(30)], ls[line(31)] = ls[line(31)], ls[line(30)]
				return ls
			})
		}, nil, []string{"0/completeness", "0/manifest", "30/chain", "30/sequence", "30/time", "31/chain", "31/derived", "31/sequence", "32/chain", "32/sequence"}},
		{"line duplicated", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte { return slices.Insert(ls, line(15), ls[line(15)]) })
		}, nil, []string{"0/completeness", "0/manifest", "15/chain", "15/derived", "15/sequence"}},
		{"foreign line inserted", func(t *testing.T, dir string) {
			extra := audit.Encode(testRecord(15, audit.ZeroHash))
			editLines(t, dir, func(ls [][]byte) [][]byte { return slices.Insert(ls, line(16), extra) })
		}, nil, []string{"0/completeness", "0/manifest", "15/chain", "15/derived", "15/sequence", "15/time", "16/chain"}},
		{"truncated mid-line", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileRecords)
			b := mustRead(t, p)
			os.WriteFile(p, b[:len(b)-40], 0o600)
		}, nil, []string{"0/completeness", "0/manifest", "40/canonical"}},
		{"truncated to 5 lines", func(t *testing.T, dir string) {
			editLines(t, dir, func(ls [][]byte) [][]byte { return ls[:5] })
		}, nil, []string{"0/completeness", "0/derived", "0/manifest", "16/sequence"}},
		{"checkpoint signature altered", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileCheckpoints)
			ls := bytes.Split(bytes.TrimSpace(mustRead(t, p)), []byte("\n"))
			var a map[string]any
			json.Unmarshal(ls[1], &a)
			n := a["note"].(string)
			i := strings.LastIndex(n, " ") + 5 // inside the base64 signature (after the key hash)
			a["note"] = n[:i] + string(rune('A'+('B'-n[i])%26)) + n[i+1:]
			ls[1], _ = json.Marshal(a)
			os.WriteFile(p, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
		}, nil, []string{"0/checkpoint", "0/manifest"}},
		{"checkpoint root altered", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileCheckpoints)
			ls := bytes.Split(bytes.TrimSpace(mustRead(t, p)), []byte("\n"))
			ls[1] = bytes.Replace(ls[1], []byte(`"size":45`), []byte(`"size":46`), 1)
			os.WriteFile(p, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
		}, nil, []string{"0/checkpoint", "0/manifest"}},
		{"checkpoint time not a time", func(t *testing.T, dir string) {
			// The time is not signed: a bundle could say anything there,
			// and the transcript printed it as the checkpoint's time.
			p := filepath.Join(dir, FileCheckpoints)
			ls := bytes.Split(bytes.TrimSpace(mustRead(t, p)), []byte("\n"))
			var a map[string]any
			json.Unmarshal(ls[1], &a)
			a["time"] = "signed on 1999-01-01 by the CEO"
			ls[1], _ = json.Marshal(a)
			os.WriteFile(p, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
		}, nil, []string{"0/checkpoint", "0/manifest"}},
		{"checkpoint time removed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileCheckpoints)
			ls := bytes.Split(bytes.TrimSpace(mustRead(t, p)), []byte("\n"))
			var a map[string]any
			json.Unmarshal(ls[1], &a)
			delete(a, "time")
			ls[1], _ = json.Marshal(a)
			os.WriteFile(p, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
		}, nil, []string{"0/checkpoint", "0/manifest"}},
		{"checkpoint removed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileCheckpoints)
			ls := bytes.Split(bytes.TrimSpace(mustRead(t, p)), []byte("\n"))
			os.WriteFile(p, append(ls[0], '\n'), 0o600)
		}, nil, []string{"0/checkpoint", "0/completeness", "0/consistency", "0/manifest"}},
		{"consistency proof altered", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, FileProof), func(p *Proof) { p.Consistency[0][0] ^= 1 })
		}, nil, []string{"0/consistency", "0/manifest"}},
		{"range proof altered", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, FileProof), func(p *Proof) { p.Range[len(p.Range)-1][31] ^= 1 })
		}, nil, []string{"0/completeness", "0/manifest"}},
		{"range proof hash dropped", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, FileProof), func(p *Proof) { p.Range = p.Range[1:] })
		}, nil, []string{"0/completeness", "0/manifest"}},
		{"manifest range shrunk", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, FileManifest), func(m *Manifest) { m.To, m.Records = 39, 29 })
		}, nil, []string{"0/completeness", "40/sequence"}},
		{"human format altered", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "audit.csv"), []byte("x\n"), 0o600)
		}, nil, []string{"0/derived", "0/manifest"}},
		{"unlisted file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "extra.jsonl"), []byte("x\n"), 0o600)
		}, nil, []string{"0/manifest"}},
		{"manifest names a path", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, FileManifest), func(m *Manifest) { m.Files["../audit.db"] = "sha256:00" })
		}, nil, []string{"0/manifest"}},
		{"wrong verifier key", nil, []byte(other.vkey), []string{"0/checkpoint"}},
		{"key under another name", nil, []byte(newTestKey(t, "someone-else", 1).vkey), []string{"0/checkpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTestBundle(t, l, k)
			if tc.tamper != nil {
				tc.tamper(t, dir)
			}
			keys := vkeys
			if tc.vkeys != nil {
				keys = tc.vkeys
			}
			tr, err := Verify(dir, keys)
			if !errors.Is(err, ErrInvalid) || tr.OK {
				t.Fatalf("Verify: err %v, OK %v; want ErrInvalid", err, tr.OK)
			}
			got := problemSet(tr.Problems)
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems %v, want %v\n%s", got, tc.want, tr.Text())
			}
			if !strings.Contains(tr.Text(), "FAILED") {
				t.Errorf("transcript does not say FAILED:\n%s", tr.Text())
			}
		})
	}
}

func TestVerifyBadInput(t *testing.T) {
	l := openRealLog(t, 12)
	k := newTestKey(t, testOrigin, 1)
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Write(context.Background(), dir, l, WriteOptions{From: 1, To: 12, Checkpoints: checkpoints(t, k, l, 12)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, nil); !errors.Is(err, ErrBadVerifierKey) {
		t.Errorf("no keys: %v", err)
	}
	if _, err := Verify(dir, []byte("not a key")); !errors.Is(err, ErrBadVerifierKey) {
		t.Errorf("bad key: %v", err)
	}
	if _, err := Verify(filepath.Join(dir, "nope"), []byte(k.vkey)); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("missing dir: %v", err)
	}
	// Everything missing: every problem reported, nothing panics.
	empty := t.TempDir()
	tr, err := Verify(empty, []byte(k.vkey))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty dir: %v", err)
	}
	if got := problemSet(tr.Problems); !slices.Equal(got, []string{"0/canonical", "0/checkpoint", "0/consistency", "0/manifest"}) {
		t.Errorf("empty dir problems %v\n%s", got, tr.Text())
	}
	// A bundle from seq 1 has one checkpoint and checks prev_hash = zero hash.
	tr, err = Verify(dir, []byte(k.vkey))
	if err != nil || tr.Lower != nil || tr.Upper.Size != 12 {
		t.Fatalf("bundle 1..12: %v %+v", err, tr)
	}
}

// TestVerifyAllRanges writes and verifies every range of a small log
// against every bracketing choice the anchor file allows.
func TestVerifyAllRanges(t *testing.T) {
	src := newMemSource(t, 9)
	k := newTestKey(t, testOrigin, 1)
	ck := checkpoints(t, k, src, 3, 4, 8, 9)
	for from := uint64(1); from <= 9; from++ {
		for to := from; to <= 9; to++ {
			dir := filepath.Join(t.TempDir(), "b")
			if _, err := Write(context.Background(), dir, src, WriteOptions{From: from, To: to, Checkpoints: ck}); err != nil {
				t.Fatalf("%d..%d: %v", from, to, err)
			}
			if tr, err := Verify(dir, []byte(k.vkey)); err != nil {
				t.Fatalf("%d..%d: %v\n%s", from, to, err, tr.Text())
			}
		}
	}
}

func TestTranscriptText(t *testing.T) {
	root := tlog.RecordHash([]byte("r"))
	tr := Transcript{
		Tool: ToolName, Version: "v0", Dir: "b", Format: BundleFormat, Origin: testOrigin, From: 11, To: 40, Records: 30,
		Keys:  []string{"k+1+AQ"},
		Upper: &CheckpointInfo{Origin: testOrigin, Size: 45, Root: root, Time: "2026-11-21T10:00:00.123Z", Signers: []string{testOrigin + "+01020304"}},
		Checks: []CheckResult{
			{Name: CheckChain, Ran: true, Detail: "d"},
			{Name: CheckCompleteness, Ran: true, Problems: 1, Detail: "d"},
			{Name: CheckConsistency, Ran: false, Detail: "not run"},
			{Name: CheckDerived, Ran: true, Problems: 1, Detail: "audit.csv regenerated"},
		},
		Problems: []Problem{
			{Seq: 21, Check: CheckChain, Expected: "aa", Got: "bb", Detail: "x"},
			{Seq: 22, Check: CheckDerived, Detail: "audit.csv line 13 (record seq 22) differs"},
		},
	}
	txt := tr.Text()
	for _, want := range []string{"origin:    " + testOrigin, "seq 11..40, 30 record line(s)", "lower:     empty tree", "upper:     size 45 root " + root.String() + " signed by " + testOrigin + "+01020304, anchored 2026-11-21T10:00:00.123Z (unsigned)",
		"chain        PASS", "completeness FAIL (1)", "consistency  SKIP", "seq 21: chain: x (expected aa, got bb)",
		"derived      FAIL (1)  audit.csv regenerated", "seq 22: derived: audit.csv line 13 (record seq 22) differs", "FAILED: 2 problem(s)", "k+1+AQ"} {
		if !strings.Contains(txt, want) {
			t.Errorf("transcript lacks %q:\n%s", want, txt)
		}
	}
}

// TestVerifyDerivedFiles changes one human-format file of a bundle and
// updates the manifest's digest to match, as someone covering their tracks
// would: the manifest is not signed, so only the regeneration of the file
// from records.jsonl catches it. Each problem names the file and its first
// differing line, and both causes the verifier cannot tell apart: an edit,
// or a custos version that renders the file differently.
func TestVerifyDerivedFiles(t *testing.T) {
	l := openRealLog(t, 50)
	k := newTestKey(t, testOrigin, 1)
	vkeys := []byte(k.vkey)
	write := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "bundle")
		ck := checkpoints(t, k, l, 10, 45)
		if _, err := Write(context.Background(), dir, l, WriteOptions{From: 11, To: 40, Checkpoints: ck, Formats: Formats}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// edit rewrites file name line by line and puts its new digest in the
	// manifest.
	edit := func(t *testing.T, dir, name string, f func(lines []string) []string) {
		t.Helper()
		p := filepath.Join(dir, name)
		lines := strings.SplitAfter(strings.TrimSuffix(string(mustRead(t, p)), "\n"), "\n")
		lines[len(lines)-1] += "\n"
		out := []byte(strings.Join(f(lines), ""))
		if err := os.WriteFile(p, out, 0o600); err != nil {
			t.Fatal(err)
		}
		editJSON(t, filepath.Join(dir, FileManifest), func(m *Manifest) { m.Files[name] = fmt.Sprintf("sha256:%x", sha256.Sum256(out)) })
	}
	// lineOf is the 0-based index of the only line holding s.
	lineOf := func(t *testing.T, lines []string, s string) int {
		t.Helper()
		at := -1
		for i, l := range lines {
			if strings.Contains(l, s) {
				if at >= 0 {
					t.Fatalf("%q on lines %d and %d", s, at+1, i+1)
				}
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("no line holds %q", s)
		}
		return at
	}
	replaceOn := func(t *testing.T, lines []string, i int, old, new string) {
		t.Helper()
		if !strings.Contains(lines[i], old) {
			t.Fatalf("line %d lacks %q", i+1, old)
		}
		lines[i] = strings.Replace(lines[i], old, new, 1)
	}

	t.Run("untouched", func(t *testing.T) {
		tr, err := Verify(write(t), vkeys)
		if err != nil || !tr.OK {
			t.Fatalf("Verify: %v\n%s", err, tr.Text())
		}
		txt := tr.Text()
		if !strings.Contains(txt, "derived      PASS      audit.csv, auditevent.ndjson, ocsf.ndjson regenerated from records.jsonl") {
			t.Errorf("transcript does not show the derived check:\n%s", txt)
		}
	})

	// Record 20 is an allowed read (testRecord).
	for _, tc := range []struct {
		name, file string
		seq        uint64
		tamper     func(t *testing.T, lines []string) ([]string, int) // returns the lines and the 1-based line changed
		detail     string
	}{
		{"csv row allow to deny", "audit.csv", 20, func(t *testing.T, ls []string) ([]string, int) {
			i := slices.IndexFunc(ls, func(l string) bool { return strings.HasPrefix(l, "2,20,") }) // columns v, seq
			replaceOn(t, ls, i, ",allow,", ",deny,")
			return ls, i + 1
		}, "differs from its regeneration"},
		{"fhir outcome success to failure", "auditevent.ndjson", 20, func(t *testing.T, ls []string) ([]string, int) {
			i := lineOf(t, ls, `{"url":"seq","valueString":"20"}`)
			replaceOn(t, ls, i, `"outcome":"0"`, `"outcome":"4"`)
			return ls, i + 1
		}, "differs from its regeneration"},
		{"ocsf status success to failure", "ocsf.ndjson", 20, func(t *testing.T, ls []string) ([]string, int) {
			i := lineOf(t, ls, `"sequence":20,`)
			replaceOn(t, ls, i, `"status_id":1,`, `"status_id":2,`)
			return ls, i + 1
		}, "differs from its regeneration"},
		{"ocsf event removed", "ocsf.ndjson", 20, func(t *testing.T, ls []string) ([]string, int) {
			i := lineOf(t, ls, `"sequence":20,`)
			return slices.Delete(ls, i, i+1), i + 1
		}, "differs from its regeneration"},
		{"csv cut", "audit.csv", 40, func(t *testing.T, ls []string) ([]string, int) {
			return ls[:len(ls)-1], len(ls)
		}, "ends at line"},
		{"fhir event added", "auditevent.ndjson", 0, func(t *testing.T, ls []string) ([]string, int) {
			return append(ls, ls[0]), len(ls) + 1
		}, "has content after line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t)
			var changed int
			edit(t, dir, tc.file, func(ls []string) []string {
				ls, changed = tc.tamper(t, ls)
				return ls
			})
			tr, err := Verify(dir, vkeys)
			if !errors.Is(err, ErrInvalid) || tr.OK {
				t.Fatalf("Verify: err %v, OK %v; want ErrInvalid\n%s", err, tr.OK, tr.Text())
			}
			if got := problemSet(tr.Problems); !slices.Equal(got, []string{fmt.Sprintf("%d/derived", tc.seq)}) {
				t.Fatalf("problems %v, want only %d/derived\n%s", got, tc.seq, tr.Text())
			}
			p := tr.Problems[0]
			where := fmt.Sprintf("%s line %d", tc.file, changed)
			switch tc.detail {
			case "has content after line":
				where = fmt.Sprintf("%s has content after line %d", tc.file, changed-1)
			case "ends at line":
				where = fmt.Sprintf("%s ends at line %d", tc.file, changed)
			}
			if !strings.Contains(p.Detail, where) || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("problem %q does not name %q (%s)", p.Detail, where, tc.detail)
			}
			// The verifier cannot tell an edit from another version's
			// renderer (docs/audit-format.md, section 13, check 6): a
			// difference must not be reported as tampering alone.
			if tc.detail != "has content after line" && !strings.Contains(p.Detail, "or was rendered by a custos version that renders it differently") {
				t.Errorf("problem %q names tampering as the only cause of a difference", p.Detail)
			}
			txt := tr.Text()
			if !strings.Contains(txt, "derived      FAIL (1)") || !strings.Contains(txt, "FAILED: 1 problem(s)") {
				t.Errorf("transcript:\n%s", txt)
			}
		})
	}
}
