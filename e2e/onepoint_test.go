package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The shipped `custos serve`, over stdio and over Streamable HTTP, at every
// protocol revision, answers a request naming a resource the caller may not
// see (a read, a page read, a subscription, a completion naming its
// patient) exactly as one naming a resource that does not exist, and its
// operational log (at debug level, the most it ever says) tells them
// apart no more than the answer does. server's TestHiddenAndMissingAnswerAlike*
// hold the same over the server package's assembly; this holds it for the
// binary, its flags and its log handler.
func TestShippedServerAnswersHiddenAndMissingAlike(t *testing.T) {
	d := newDataset(t)
	clinician := d.principal("clinician")
	var p struct{ Patients []string }
	raw, err := os.ReadFile(clinician)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	// A note of a patient outside the clinician's care team: hidden.
	var hidden, hPatient string
	for _, l := range d.lines(t) {
		if strings.HasPrefix(l.URI, "note://general-hospital/") && !slices.Contains(p.Patients, l.Labels.Patient) {
			hidden, hPatient = l.URI, l.Labels.Patient
			break
		}
	}
	if hidden == "" {
		t.Fatal("every note is of the clinician's care team: the data set should hide some")
	}
	missing, mPatient := missingURI(hidden), "00000000-0000-4000-8000-00000000ffff"
	normalize := func(s string) string {
		s = strings.ReplaceAll(s, hidden, missing)
		s = strings.ReplaceAll(s, hPatient, mPatient)
		return receipt.ReplaceAllString(s, `"custos/audit-event":"…"`)
	}
	bodies := func(rev string, ofHidden bool) []string {
		uri, patient := missing, mPatient
		if ofHidden {
			uri, patient = hidden, hPatient
		}
		meta := ""
		if rev >= "2026-07-28" {
			meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
		}
		sub := `{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"` + uri + `"` + meta + `}}`
		if rev >= "2026-07-28" {
			sub = `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + uri + `"]}` + meta + `}}`
		}
		return []string{
			`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"` + uri + `"` + meta + `}}`,
			`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"` + uri + `/pages/1"` + meta + `}}`,
			sub,
			`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"note://{tenant}/patients/{patient}/notes/{id}"},"argument":{"name":"id","value":""},"context":{"arguments":{"tenant":"general-hospital","patient":"` + patient + `"}}` + meta + `}}`,
		}
	}
	// compare sends each request for the hidden and the missing resource
	// through send and compares the answers and the log lines written
	// meanwhile.
	compare := func(t *testing.T, rev string, logs func() string, send func(body string) string) {
		t.Helper()
		// The log lines of one request: the child writes its stderr as it
		// likes, so wait for the request's "audited" line, every request
		// here has exactly one.
		logged := func(do func() string) (string, string) {
			n := len(logs())
			a := do()
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs()[n:], `"msg":"audited"`); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no audited line logged for %s", a)
				}
			}
			time.Sleep(20 * time.Millisecond)
			return a, logs()[n:]
		}
		h, m := bodies(rev, true), bodies(rev, false)
		for i := range h {
			ha, hl := logged(func() string { return send(h[i]) })
			ma, ml := logged(func() string { return send(m[i]) })
			if normalize(ha) != normalize(ma) {
				t.Errorf("request %d: hidden and missing answered differently\nhidden:  %s\nmissing: %s", i, ha, ma)
			}
			if a, b := logShape(hl), logShape(ml); a != b {
				t.Errorf("request %d: the log tells hidden from missing\nhidden:  %s\nmissing: %s", i, a, b)
			}
		}
	}
	revisions := []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

	t.Run("stdio", func(t *testing.T) {
		for _, rev := range revisions {
			t.Run(rev, func(t *testing.T) {
				s := startShippedStdio(t, d, clinician)
				if rev < "2026-07-28" {
					if a := s.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + rev + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); !strings.Contains(a, `"protocolVersion":"`+rev+`"`) {
						t.Fatalf("initialize at %s answered %s", rev, a)
					}
					s.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				}
				compare(t, rev, s.stderr.String, s.call)
			})
		}
	})

	t.Run("http", func(t *testing.T) {
		tokens := filepath.Join(t.TempDir(), "tokens.json")
		tok := newToken(t, clinician, tokens)
		url, _, logs := httpServer(t, d, tokens)
		client := &http.Client{Timeout: 30 * time.Second}
		post := func(hdr map[string]string, body string) (*http.Response, string) {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, string(b)
		}
		for _, rev := range revisions {
			t.Run(rev, func(t *testing.T) {
				hdr := map[string]string{"Mcp-Protocol-Version": rev}
				if rev < "2026-07-28" {
					resp, a := post(nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+rev+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
					if hdr["Mcp-Session-Id"] = resp.Header.Get("Mcp-Session-Id"); hdr["Mcp-Session-Id"] == "" {
						t.Fatalf("initialize at %s: %s", rev, a)
					}
					post(hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				}
				compare(t, rev, logs.String, func(body string) string {
					h := map[string]string{}
					for k, v := range hdr {
						h[k] = v
					}
					if rev >= "2026-07-28" {
						var m struct {
							Method string
							Params struct{ URI string }
						}
						json.Unmarshal([]byte(body), &m)
						h["Mcp-Method"] = m.Method
						if m.Method == "resources/read" {
							h["Mcp-Name"] = m.Params.URI
						}
					}
					resp, a := post(h, body)
					resp.Header.Del("Date")
					hb, _ := json.Marshal(resp.Header)
					return resp.Status + " " + string(hb) + " " + a
				})
			})
		}
	})
}

// receipt matches an audit receipt: every answer names a record of its own.
var receipt = regexp.MustCompile(`"custos/audit-event":"[^"]*"`)

// logShape is the log lines of requests (those with an action, and every
// warning and error) without the attributes that differ from one request
// to the next (time, seq, decision ids), and without the policy's
// "policy decision" debug lines: like the audit record, they say what each
// evaluation decided (a missing resource is decided as if it existed and
// may be allowed before it is found missing), and how many candidates a
// completion decided, the work the answer does not show (docs/uris.md,
// "Completion").
func logShape(lines string) string {
	var out []string
	for line := range strings.Lines(lines) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			out = append(out, strings.TrimSpace(line))
			continue
		}
		if _, ok := m["action"]; m["msg"] == "policy decision" || (!ok && m["level"] != "WARN" && m["level"] != "ERROR") {
			continue // also the background's lines (audit scrub passes, checkpoints), which name no request
		}
		for _, k := range []string{"time", "seq", "decision", "decision_id", "list", "completion"} {
			delete(m, k)
		}
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// shippedStdio is `custos serve --dev --stdio --log-level debug` as a
// raw line client: one answer per call, read before the next is sent.
type shippedStdio struct {
	t      *testing.T
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *syncBuf
}

func startShippedStdio(t *testing.T, d *dataset, principal string) *shippedStdio {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, bin, "serve", "--dev", "--data-dir", d.data, "--stdio", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "CUSTOS_PRINCIPAL_FILE="+principal)
	s := &shippedStdio{t: t, stderr: &syncBuf{}}
	cmd.Stderr = s.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.in, s.out = in, bufio.NewScanner(out)
	s.out.Buffer(nil, 4<<20)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.stderr.String(), "serving MCP on stdio"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve --stdio did not start:\n%s", s.stderr)
		}
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve --stdio: %v\n%s", err, s.stderr)
		}
		cancel()
	})
	return s
}

// notify writes a line that gets no answer.
func (s *shippedStdio) notify(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// call writes a line and returns the answer's line.
func (s *shippedStdio) call(line string) string {
	s.t.Helper()
	s.notify(line)
	if !s.out.Scan() {
		s.t.Fatalf("no answer to %s: %v\n%s", line, s.out.Err(), s.stderr)
	}
	return s.out.Text()
}
