package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

// TestEarlierRendererIsThePreviousVersions: rendererBefore20261206 renders
// every golden record as custos did before probe-export3 (384f6a1). The
// files in testdata/golden/before-20261206 were written by
// TestFormatsGolden -update run with the code of 0dfeb9b (the records
// auditlogused and backup added to its goldenRecords); a record missing
// there rendered then as it does now.
func TestEarlierRendererIsThePreviousVersions(t *testing.T) {
	for name, r := range goldenRecords() {
		r, err := audit.Decode(audit.Encode(r))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Format{FormatFHIR, FormatOCSF} {
			b, err := f.renderAs(r, rendererBefore20261206)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, line := range bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
				got = append(got, indent(t, bytes.TrimSuffix(line, []byte("\n")))...)
			}
			file := name + "." + string(f) + ".json"
			want, err := os.ReadFile(filepath.Join("testdata", "golden", "before-20261206", file))
			if os.IsNotExist(err) {
				want, err = os.ReadFile(filepath.Join("testdata", "golden", file))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the earlier renderer differs from 0dfeb9b's:\n%s", file, got)
			}
		}
	}
}

// TestVerifyEarlierVersionsBundle: a bundle whose auditevent.ndjson and
// ocsf.ndjson were rendered by the custos before 2026-12-06 verifies: its
// records.jsonl is the same and its human files are that version's
// rendering of those records, not a change after export. It failed the
// derived check ('the file was changed after export, or was rendered by a
// custos version that renders it differently'): every bundle exported by
// 0dfeb9b that holds an auditor's access (any export after the first) or a
// record of no MCP request failed 'custos audit verify --bundle' with the
// new build. An edit of such a line is still reported.
func TestVerifyEarlierVersionsBundle(t *testing.T) {
	l := openRealLog(t, 30)
	ctx := context.Background()
	for i, action := range []string{"audit/report", "backup", "policy/load"} {
		e := testRecord(uint64(31+i), "").Entry
		e.Action, e.URIs, e.Reason = action, nil, "by=ops"
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	k := newTestKey(t, testOrigin, 1)
	vkeys := []byte(k.vkey)
	// write exports records 11..33 and rewrites the FHIR and OCSF files
	// as the earlier version rendered them, with edit applied to each
	// rendering of a record.
	write := func(t *testing.T, edit func(seq uint64, f Format, b []byte) []byte) string {
		dir := filepath.Join(t.TempDir(), "bundle")
		ck := checkpoints(t, k, l, 10, 33)
		if _, err := Write(ctx, dir, l, WriteOptions{From: 11, To: 33, Checkpoints: ck, Formats: Formats}); err != nil {
			t.Fatal(err)
		}
		recs := strings.SplitAfter(strings.TrimSuffix(string(mustRead(t, filepath.Join(dir, FileRecords))), "\n"), "\n")
		for _, f := range []Format{FormatFHIR, FormatOCSF} {
			var out []byte
			for _, line := range recs {
				r, err := audit.Decode([]byte(strings.TrimSuffix(line, "\n")))
				if err != nil {
					t.Fatal(err)
				}
				b, err := f.renderAs(r, rendererBefore20261206)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, edit(r.Seq, f, b)...)
			}
			if bytes.Equal(out, mustRead(t, filepath.Join(dir, f.FileName()))) {
				t.Fatalf("%s: the earlier rendering is the current one", f.FileName())
			}
			if err := os.WriteFile(filepath.Join(dir, f.FileName()), out, 0o600); err != nil {
				t.Fatal(err)
			}
			editJSON(t, filepath.Join(dir, FileManifest), func(m *Manifest) { m.Files[f.FileName()] = fmt.Sprintf("sha256:%x", sha256.Sum256(out)) })
		}
		return dir
	}
	t.Run("as exported", func(t *testing.T) {
		tr, err := Verify(write(t, func(_ uint64, _ Format, b []byte) []byte { return b }), vkeys)
		if err != nil || !tr.OK {
			t.Fatalf("an earlier version's bundle does not verify: %v\n%s", err, tr.Text())
		}
		if !strings.Contains(tr.Text(), "an earlier custos version's") {
			t.Errorf("the transcript does not say some renderings are an earlier version's:\n%s", tr.Text())
		}
	})
	t.Run("edited", func(t *testing.T) {
		tr, err := Verify(write(t, func(seq uint64, f Format, b []byte) []byte {
			if seq == 32 && f == FormatOCSF {
				return bytes.Replace(b, []byte(`"operation":"backup"`), []byte(`"operation":"backup2"`), 1)
			}
			return b
		}), vkeys)
		if err == nil || tr.OK || !strings.Contains(tr.Text(), "seq 32: derived: ocsf.ndjson") {
			t.Fatalf("an edit of an earlier version's line is not reported:\n%s", tr.Text())
		}
	})
}
