package admin

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/backup"
)

// progressDoer is what both transports offer: access.Local and *Client.
type progressDoer interface {
	Do(ctx context.Context, op access.Op, req any, consume func(io.Reader) error) (access.Result, error)
	DoProgress(ctx context.Context, op access.Op, req any, consume func(io.Reader) error, progress func(access.Progress)) (access.Result, error)
}

// serveProgressLog serves a log of n records, a signed checkpoint of them
// anchored in its data directory and an (empty) catalog.db, as a server's
// data directory holds them.
func serveProgressLog(t *testing.T, n int) (*Server, *audit.Log, string) {
	t.Helper()
	s, l, dir, _ := serveProgressLogKeys(t, n)
	return s, l, dir
}

// serveProgressLogKeys is serveProgressLog that also returns the verifier
// key file of the checkpoint's signer.
func serveProgressLogKeys(t *testing.T, n int) (*Server, *audit.Log, string, []byte) {
	t.Helper()
	s, l, dir := serveLog(t, nil)
	for i := 3; i < n; i++ {
		if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow}); err != nil {
			t.Fatal(err)
		}
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "custos.test/progress")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	size, root, err := l.TreeHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := checkpoint.Checkpoint{Origin: signer.Name(), Size: size, Root: root}
	signed, err := checkpoint.Sign(c, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&checkpoint.Anchor{Dir: dir}).Append(context.Background(), signed, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, backup.FileCatalog), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return s, l, dir, checkpoint.FormatVerifierFile([]string{vkey})
}

// checkReports: progress was reported, in one unit, never going back or
// past its total, and ended at its total.
func checkReports(t *testing.T, what string, ps []access.Progress, unit string) access.Progress {
	t.Helper()
	if len(ps) == 0 {
		t.Fatalf("%s: no progress reported", what)
	}
	for i, p := range ps {
		if p.Unit != unit || p.Done > p.Total || p.Done < 0 || (i > 0 && p.Done < ps[i-1].Done) {
			t.Fatalf("%s: report %d of %d is %+v (previous %+v)", what, i, len(ps), p, ps[max(i-1, 0)])
		}
	}
	last := ps[len(ps)-1]
	if last.Done != last.Total {
		t.Fatalf("%s: the last report %+v does not reach its total", what, last)
	}
	return last
}

func copyTo(b *bytes.Buffer) func(io.Reader) error {
	return func(r io.Reader) error { _, err := io.Copy(b, r); return err }
}

// tarFile is the content of name in tar archive b.
func tarFile(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the archive: %v", name, err)
		}
		if h.Name == name {
			out, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
}

// TestProgressOverBothTransports: verify, export (JSONL, CSV), bundle and
// backup report their progress in process (access.Local) and over the
// socket (frames), counts only, reaching the total; the output with
// progress is the output without it, byte for byte (an export's differs
// only by one more record at the end: the first run's access record is in
// the second's view).
func TestProgressOverBothTransports(t *testing.T) {
	const n = 2500 // several chunks of verify and export
	_, l, dir := serveProgressLog(t, n)
	ctx := context.Background()
	c, err := Dial(ctx, Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: access.Self()}
	ask := access.Ask{Purpose: "HOPERAT"}
	for _, tr := range []struct {
		name string
		d    progressDoer
	}{{"local", local}, {"socket", c}} {
		t.Run(tr.name, func(t *testing.T) {
			for _, f := range []audit.Format{audit.FormatJSONL, audit.FormatCSV} {
				req := access.ExportRequest{Ask: ask, Format: f}
				var plain, watched bytes.Buffer
				if _, err := tr.d.Do(ctx, access.OpExport, req, copyTo(&plain)); err != nil {
					t.Fatal(err)
				}
				var ps []access.Progress
				var first audit.Record
				res, err := tr.d.DoProgress(ctx, access.OpExport, req, copyTo(&watched), func(p access.Progress) {
					if len(ps) == 0 {
						first = headRecord(t, l)
					}
					ps = append(ps, p)
				})
				if err != nil {
					t.Fatal(err)
				}
				last := checkReports(t, "export "+string(f), ps, access.UnitRecords)
				if uint64(last.Total) != res.AccessSeq || len(ps) < 3 {
					t.Fatalf("export %s: last report %+v of %d, want the view's end %d", f, last, len(ps), res.AccessSeq)
				}
				if first.Action != access.ActionExport || first.Seq != res.AccessSeq {
					t.Fatalf("export %s: when the first progress came, the log's head was %d %s, not the access record %d", f, first.Seq, first.Action, res.AccessSeq)
				}
				rest, ok := bytes.CutPrefix(watched.Bytes(), plain.Bytes())
				if !ok || bytes.Count(rest, []byte("\n")) != 1 || !bytes.Contains(rest, []byte("audit/export")) {
					t.Fatalf("export %s with progress is not the export without it plus its access record: %d bytes, then %q", f, plain.Len(), rest)
				}
			}

			var plain, watched access.VerifyResult
			if _, err := tr.d.Do(ctx, access.OpVerify, access.VerifyRequest{}, func(r io.Reader) error { return json.NewDecoder(r).Decode(&plain) }); err != nil {
				t.Fatal(err)
			}
			var ps []access.Progress
			if _, err := tr.d.DoProgress(ctx, access.OpVerify, access.VerifyRequest{}, func(r io.Reader) error { return json.NewDecoder(r).Decode(&watched) }, func(p access.Progress) { ps = append(ps, p) }); err != nil {
				t.Fatal(err)
			}
			last := checkReports(t, "verify", ps, access.UnitRecords)
			if !plain.OK || !watched.OK || watched.Summary.Records != plain.Summary.Records+1 || last.Done != int64(watched.Summary.Records) {
				t.Fatalf("verify: %+v then %+v, last report %+v", plain.Summary, watched.Summary, last)
			}

			breq := access.BundleRequest{Ask: ask, From: 10, To: n - 10, Formats: []bundle.Format{bundle.FormatCSV}}
			var bplain, bwatched bytes.Buffer
			if _, err := tr.d.Do(ctx, access.OpBundle, breq, copyTo(&bplain)); err != nil {
				t.Fatal(err)
			}
			ps = nil
			if _, err := tr.d.DoProgress(ctx, access.OpBundle, breq, copyTo(&bwatched), func(p access.Progress) { ps = append(ps, p) }); err != nil {
				t.Fatal(err)
			}
			if last := checkReports(t, "bundle", ps, access.UnitRecords); last.Total != n-19 {
				t.Fatalf("bundle: last report %+v, want %d records", last, n-19)
			}
			for _, name := range []string{"records.jsonl", "proof.json", "audit.csv"} {
				if !bytes.Equal(tarFile(t, bplain.Bytes(), name), tarFile(t, bwatched.Bytes(), name)) {
					t.Fatalf("bundle: %s with progress differs from %s without", name, name)
				}
			}

			var got int64
			ps = nil
			out := filepath.Join(t.TempDir(), "bk")
			var staged *backup.Staged
			_, err := tr.d.DoProgress(ctx, access.OpBackup, access.BackupRequest{Ask: ask, Out: out}, func(r io.Reader) error {
				var err error
				staged, err = backup.Receive(&countReader{r: r, n: &got}, out)
				return err
			}, func(p access.Progress) { ps = append(ps, p) })
			if err != nil {
				t.Fatal(err)
			}
			defer staged.Discard() // the lock, held until Discard (partialdir.Staged)
			if _, err := staged.Commit(ctx, nil); err != nil {
				t.Fatalf("the backup taken with progress does not verify: %v", err)
			}
			if last := checkReports(t, "backup", ps, access.UnitBytes); last.Done != got {
				t.Fatalf("backup: last report %+v, but %d bytes were received", last, got)
			}
		})
	}
}

// headRecord is l's newest record.
func headRecord(t *testing.T, l *audit.Log) audit.Record {
	head, _ := l.Head()
	return recordAt(t, l, head)
}

// recordAt is l's record seq.
func recordAt(t *testing.T, l *audit.Log, seq uint64) audit.Record {
	var rec audit.Record
	err := l.Records(context.Background(), seq, seq, func(_ uint64, c []byte) (err error) {
		rec, err = audit.Decode(c)
		return err
	})
	if err != nil {
		t.Error(err)
	}
	return rec
}

type countReader struct {
	r io.Reader
	n *int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// TestProgressProtocolVersions: a client that predates progress (no
// request header) gets the unframed output; a client that asks a server
// that predates progress (which ignores the header) gets the output
// without progress; an error before any output is the plain JSON error
// with its status, progress or not.
func TestProgressProtocolVersions(t *testing.T) {
	_, _, dir := serveProgressLog(t, 50)
	ctx := context.Background()
	c, err := Dial(ctx, Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}

	// The old client's request: no header.
	resp, err := c.post(ctx, string(access.OpExport), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderProgress) != "" || resp.Trailer.Get(TrailerResult) == "" {
		t.Fatalf("old client: %v, %s, header %q, trailer %q", err, resp.Status, resp.Header.Get(HeaderProgress), resp.Trailer.Get(TrailerResult))
	}
	var plain bytes.Buffer
	if _, err := c.Do(ctx, access.OpExport, req, copyTo(&plain)); err != nil {
		t.Fatal(err)
	}
	if rest, ok := bytes.CutPrefix(plain.Bytes(), body); !ok || len(body) == 0 || bytes.Count(rest, []byte("\n")) != 1 {
		t.Fatalf("old client: the body is not the plain export (%d bytes; the next export has %d)", len(body), plain.Len())
	}

	// A framed answer was asked for and is given.
	resp, err = c.post(ctx, string(access.OpExport), req, http.Header{HeaderProgress: {ProgressFrames}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get(HeaderProgress) != ProgressFrames || len(body) == 0 || (body[0] != frameOutput && body[0] != frameProgress) {
		t.Fatalf("new client: header %q, body starts %q", resp.Header.Get(HeaderProgress), body[:min(len(body), 8)])
	}

	// An error before any output: JSON with its status, no frames.
	var called bool
	_, err = c.DoProgress(ctx, access.OpExport, access.ExportRequest{Format: audit.FormatJSONL}, access.Discard, func(access.Progress) { called = true })
	var ae *access.Error
	if !errors.As(err, &ae) || ae.Code != "bad_request" || called {
		t.Fatalf("no purpose, with progress: %v (progress called: %v), want bad_request", err, called)
	}

	// A server that predates progress ignores the header.
	ol, path := audittest.Open(t, audit.Options{Node: "n1"})
	odir := filepath.Dir(path)
	old, err := Listen(Path(odir), Config{Service: access.New(ol, nil, odir, nil)})
	if err != nil {
		t.Fatal(err)
	}
	h := old.hs.Handler
	old.hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(HeaderProgress)
		h.ServeHTTP(w, r)
	})
	go old.Serve()
	t.Cleanup(func() { old.Shutdown(context.Background()) })
	oc, err := Dial(ctx, Path(odir))
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	var got, next bytes.Buffer
	called = false
	res, err := oc.DoProgress(ctx, access.OpExport, req, copyTo(&got), func(access.Progress) { called = true })
	if err != nil || called || res.Records != 1 {
		t.Fatalf("old server: %+v, %v, progress called %v", res, err, called)
	}
	if _, err := oc.Do(ctx, access.OpExport, req, copyTo(&next)); err != nil {
		t.Fatal(err)
	}
	if rest, ok := bytes.CutPrefix(next.Bytes(), got.Bytes()); !ok || got.Len() == 0 || bytes.Count(rest, []byte("\n")) != 1 {
		t.Fatalf("old server: the output is not the plain export:\n%.300s", got.String())
	}
}

// TestDeframer: output frames are the output, byte for byte, split
// anywhere; progress frames go to the callback; a body that ends inside a
// frame, a frame of unknown kind or an oversized progress frame is an
// error, never output.
func TestDeframer(t *testing.T) {
	var body bytes.Buffer
	fw := &frameWriter{w: &body}
	fw.Write([]byte("hello, "))
	fw.progress(access.Progress{Done: 1, Total: 2, Unit: access.UnitRecords})
	fw.Write(nil)
	fw.Write([]byte("world\n"))
	fw.progress(access.Progress{Done: 2, Total: 2, Unit: access.UnitRecords})
	var ps []access.Progress
	out, err := io.ReadAll(&deframer{r: bytes.NewReader(body.Bytes()), progress: func(p access.Progress) { ps = append(ps, p) }})
	if err != nil || string(out) != "hello, world\n" || len(ps) != 2 || ps[1].Done != 2 {
		t.Fatalf("%q, %v, %+v", out, err, ps)
	}
	// One byte at a time.
	out, err = io.ReadAll(io.LimitReader(&oneByte{&deframer{r: bytes.NewReader(body.Bytes())}}, 1<<20))
	if err != nil || string(out) != "hello, world\n" {
		t.Fatalf("byte by byte: %q, %v", out, err)
	}
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"cut in a header", body.Bytes()[:3], "unexpected EOF"},
		{"cut in an output frame", body.Bytes()[:8], "unexpected EOF"},
		{"cut in a progress frame", body.Bytes()[:15], "unexpected EOF"},
		{"unknown kind", []byte("x\x00\x00\x00\x01a"), "unknown kind"},
		{"oversized progress", []byte("p\x00\x01\x00\x00{"), "progress frame of 65536 bytes"},
		{"progress that is not one", []byte("p\x00\x00\x00\x02{]"), "not one"},
	} {
		_, err := io.ReadAll(&deframer{r: bytes.NewReader(c.body)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// FuzzDeframer: any body is read without panicking, and what frameWriter
// writes reads back as the same output.
func FuzzDeframer(f *testing.F) {
	f.Add([]byte("o\x00\x00\x00\x02hip\x00\x00\x00\x02{}"), 3)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		io.ReadAll(&deframer{r: bytes.NewReader(b), progress: func(access.Progress) {}})
		var body bytes.Buffer
		fw := &frameWriter{w: &body}
		cut = min(max(cut, 0), len(b))
		fw.Write(b[:cut])
		fw.progress(access.Progress{Done: int64(cut), Total: int64(len(b)), Unit: access.UnitBytes})
		fw.Write(b[cut:])
		out, err := io.ReadAll(&deframer{r: &body})
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("round trip: %q, %v; want %q", out, err, b)
		}
	})
}

// TestComplianceProgressOverBothTransports: compliance (the whole log
// verified, records 1..N scanned for retention, the period's bundle
// written) reports its progress in process and over the socket, in
// records, counts only, first after its access record is durable, and
// ends at a total that is the sum of its three passes; the package it
// sends with progress is the one it sends without (the bundle's files byte
// for byte: both end at the same checkpoint).
func TestComplianceProgressOverBothTransports(t *testing.T) {
	const n = 2500 // several chunks of each pass
	_, l, dir, keys := serveProgressLogKeys(t, n)
	ctx := context.Background()
	c, err := Dial(ctx, Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: access.Self()}
	req := access.ComplianceRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Retention: 6 * 365 * 24 * time.Hour, VerifierKeys: keys}
	for _, tr := range []struct {
		name string
		d    progressDoer
	}{{"local", local}, {"socket", c}} {
		t.Run(tr.name, func(t *testing.T) {
			read := func(into string, progress func(access.Progress)) (access.ComplianceResult, access.Result) {
				t.Helper()
				var out access.ComplianceResult
				res, err := tr.d.DoProgress(ctx, access.OpCompliance, req, func(r io.Reader) (err error) {
					out, err = access.ReadCompliance(r, into)
					return err
				}, progress)
				if err != nil {
					t.Fatal(err)
				}
				return out, res
			}
			plainDir, watchedDir := filepath.Join(t.TempDir(), "p"), filepath.Join(t.TempDir(), "w")
			plain, _ := read(plainDir, nil)
			var ps []access.Progress
			var first audit.Record
			watched, res := read(watchedDir, func(p access.Progress) {
				if len(ps) == 0 {
					first = headRecord(t, l)
				}
				ps = append(ps, p)
			})
			last := checkReports(t, "compliance", ps, access.UnitRecords)
			if first.Action != access.ActionComplianceReport || first.Seq != res.AccessSeq {
				t.Fatalf("when the first progress came, the log's head was %d %s, not the access record %d", first.Seq, first.Action, res.AccessSeq)
			}
			// verify walks the whole log, the scan reads 1..N, the bundle
			// its records.
			want := watched.Verification.Log.Records + int64(res.AccessSeq) + int64(res.Records)
			if last.Total != want || len(ps) < 3 || ps[0].Total < want {
				t.Fatalf("%d reports, the first %+v, the last %+v; want a total of %d from the start (%d verified, %d scanned, %d bundled)",
					len(ps), ps[0], last, want, watched.Verification.Log.Records, res.AccessSeq, res.Records)
			}
			if !plain.Verification.Log.OK || !watched.Verification.Log.OK || !watched.Verification.Anchors.OK {
				t.Fatalf("verification: %+v then %+v", plain.Verification, watched.Verification)
			}

			// A period inside the log: the bundle's pass is shorter than
			// the N first counted for it, and the total shrinks to the sum.
			period := req
			period.Since, period.Until = recordAt(t, l, 1000).Time, recordAt(t, l, 2000).Time
			ps = nil
			var part access.ComplianceResult
			res, err := tr.d.DoProgress(ctx, access.OpCompliance, period, func(r io.Reader) (err error) {
				part, err = access.ReadCompliance(r, filepath.Join(t.TempDir(), "period"))
				return err
			}, func(p access.Progress) { ps = append(ps, p) })
			if err != nil {
				t.Fatal(err)
			}
			last = checkReports(t, "compliance of a period", ps, access.UnitRecords)
			if res.Records != 1000 || last.Total != part.Verification.Log.Records+int64(res.AccessSeq)+1000 {
				t.Fatalf("period: %d records bundled, last report %+v (%d verified, N %d)", res.Records, last, part.Verification.Log.Records, res.AccessSeq)
			}

			entries, err := os.ReadDir(plainDir)
			if err != nil || len(entries) < 4 {
				t.Fatalf("the bundle holds %d files (%v)", len(entries), err)
			}
			for _, e := range entries {
				if e.Name() == bundle.FileManifest {
					continue // its creation time
				}
				a, err1 := os.ReadFile(filepath.Join(plainDir, e.Name()))
				b, err2 := os.ReadFile(filepath.Join(watchedDir, e.Name()))
				if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
					t.Fatalf("the bundle's %s with progress differs from %s without (%v %v)", e.Name(), e.Name(), err1, err2)
				}
			}
		})
	}
}
