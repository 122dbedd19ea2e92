package fhirsync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-mcp/custos/fhirin"
)

// bulkResult is what a Bulk export staged.
type bulkResult struct {
	transactionTime time.Time
	request         string
}

// bulkManifest is the server's completion manifest (fhirin's model of it)
// and when the server served it.
type bulkManifest struct {
	fhirin.ExportManifest
	// served is the server's clock when it served the manifest (its Date
	// header); zero without one.
	served time.Time
}

// maxManifestPages bounds the pages of one manifest.
const maxManifestPages = 10000

// bulkExport runs a Bulk Data export: kick-off, poll, download into st.
func (c *client) bulkExport(ctx context.Context, st *stage, path string, since time.Time) (bulkResult, error) {
	u, err := c.resolve(path)
	if err != nil {
		return bulkResult{}, err
	}
	q := url.Values{"_outputFormat": {"application/fhir+ndjson"}}
	if !since.IsZero() {
		q.Set("_since", since.UTC().Format(time.RFC3339Nano))
	}
	if len(c.o.Types) > 0 {
		q.Set("_type", strings.Join(c.o.Types, ","))
	}
	u.RawQuery = q.Encode()
	c.o.Progress(Progress{Phase: "kick-off", Detail: where(u)})
	resp, err := c.get(ctx, u, "application/fhir+json", http.Header{"Prefer": {"respond-async"}})
	if err != nil {
		return bulkResult{}, fmt.Errorf("bulk kick-off: %w", err)
	}
	drain(resp)
	if resp.StatusCode != http.StatusAccepted {
		return bulkResult{}, fmt.Errorf("%w: GET %s: HTTP %d, want 202 Accepted", ErrServer, where(u), resp.StatusCode)
	}
	loc := resp.Header.Get("Content-Location")
	if loc == "" {
		return bulkResult{}, fmt.Errorf("%w: GET %s: 202 without Content-Location", ErrServer, where(u))
	}
	status, err := c.resolve(loc)
	if err != nil {
		return bulkResult{}, err
	}
	// From here on the server holds an export: it is deleted however the
	// sync ends (cancelled while running, or its files released).
	defer c.deleteJob(ctx, status)
	m, err := c.poll(ctx, status)
	if err != nil {
		return bulkResult{}, err
	}
	tt, err := time.Parse(time.RFC3339Nano, m.TransactionTime)
	if err != nil {
		return bulkResult{}, fmt.Errorf("%w: GET %s: manifest transactionTime is not an instant", ErrServer, where(status))
	}
	// transactionTime is when the export's query ran, so before the
	// server served its manifest: a later one (an export worker whose
	// clock runs ahead) would make the next _since skip every resource
	// updated in between. The Date header has second precision (truncated):
	// only a transactionTime past the end of its second is clamped to it.
	if !m.served.IsZero() && !tt.Before(m.served.Add(time.Second)) {
		c.o.Logger.Warn("fhirsync: the manifest's transactionTime is after the server's Date header; the next increment starts at the Date", "request", logged("GET", status), "transactionTime", tt, "date", m.served)
		tt = m.served
	}
	tt = c.notAhead(tt, "transactionTime")
	// Files that need no token may live on another origin (pre-signed
	// object storage URLs); they are then fetched without the token.
	fc := c
	if m.RequiresAccessToken != nil && !*m.RequiresAccessToken {
		fc = &client{o: c.o, base: c.base, anyOrigin: true, creds: c.creds}
		defer func() { c.requests.Add(fc.requests.Load()) }()
	}
	if err := fc.manifestPages(ctx, &m); err != nil {
		return bulkResult{}, err
	}
	// Errors, warnings and information of the export are in its report
	// (fhirin.ExportManifest.Reports): its error
	// (2.0) or outcome (later editions) files, or an output file of
	// type OperationOutcome (a server listing its report as output: read
	// as one, never staged as data, as custos import reads such a
	// manifest): an error means an incomplete export, fetched before any
	// output.
	for _, r := range m.Reports() {
		if err := fc.checkOutcomes(ctx, r.URL); err != nil {
			return bulkResult{}, err
		}
	}
	output := slices.DeleteFunc(slices.Clone(m.Output), fhirin.ManifestFile.IsReport)
	n := 0
	for _, o := range output {
		// The type is the server's text: named only if it is an R4
		// resource type (one of the form of one, "JaneDoe", was quoted).
		if !validType(o.Type) || !fhirin.IsResourceType(o.Type) {
			return bulkResult{}, fmt.Errorf("%w: GET %s: output of a type that is no R4 resource type (not repeated)", ErrServer, where(status))
		}
		if len(c.o.Types) > 0 && !slices.Contains(c.o.Types, o.Type) {
			return bulkResult{}, fmt.Errorf("%w: GET %s: output of type %q, which the export's _type did not ask for", ErrServer, where(status), o.Type)
		}
		k, err := fc.download(ctx, st, o.URL, o.Type, false)
		if err != nil {
			return bulkResult{}, err
		}
		// A file cut exactly at a line end is still a truncated file when
		// the manifest says how many resources it holds.
		if o.Count != nil && *o.Count != k {
			u, _ := fc.resolve(o.URL)
			return bulkResult{}, fmt.Errorf("%w: GET %s: %d resources, the manifest says %d (truncated download?)", ErrServer, where(u), k, *o.Count)
		}
		n += k
		c.o.Progress(Progress{Phase: "download", Detail: o.Type, Resources: n})
	}
	for _, d := range m.Deleted {
		if _, err := fc.download(ctx, st, d.URL, "Bundle", true); err != nil {
			return bulkResult{}, err
		}
	}
	// A resource deleted and created again since _since is in the output
	// and a deleted file: the output, what the server holds now, wins.
	if k, err := st.dropSuperseded(); err != nil {
		return bulkResult{}, fmt.Errorf("staging: %w", err)
	} else if k > 0 {
		c.o.Logger.Info("fhirsync: deletions of resources the export also holds (created again) dropped", "deletions", k)
	}
	c.o.Progress(Progress{Phase: "download", Detail: "done", Resources: n})
	return bulkResult{transactionTime: tt, request: u.Path + "?" + q.Encode()}, nil
}

// manifestPages reads the pages after m (link next) into m: a manifest in
// pages is only complete at its end. Each page is checked like the first.
func (c *client) manifestPages(ctx context.Context, m *bulkManifest) error {
	seen := map[string]bool{}
	for ref := m.Next(); ref != ""; {
		u, err := c.resolve(ref)
		if err != nil {
			return err
		}
		if seen[u.String()] || len(seen) >= maxManifestPages {
			return fmt.Errorf("%w: GET %s: the manifest's next links loop", ErrServer, where(u))
		}
		seen[u.String()] = true
		resp, err := c.get(ctx, u, "application/json", nil)
		if err != nil {
			return fmt.Errorf("bulk manifest page: %w", err)
		}
		var p bulkManifest
		err = decodeJSON(resp, jsonTypes, &p)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if err := p.organized(u); err != nil {
			return err
		}
		m.Output = append(m.Output, p.Output...)
		m.Deleted = append(m.Deleted, p.Deleted...)
		m.Error = append(m.Error, p.Error...)
		m.Outcome = append(m.Outcome, p.Outcome...)
		ref = p.Next()
	}
	return nil
}

// organized refuses output organized by a resource type (outputOrganizedBy,
// whose files mix types): custos never asks for it.
func (m *bulkManifest) organized(u *url.URL) error {
	if m.OutputOrganizedBy == "" {
		return nil
	}
	by := "another type"
	if validType(m.OutputOrganizedBy) {
		by = m.OutputOrganizedBy
	}
	return fmt.Errorf("%w: GET %s: output organized by %s (outputOrganizedBy), which custos does not ask for and cannot stage; refused", ErrServer, where(u), by)
}

// checkOutcomes reads one error/outcome file (NDJSON of OperationOutcome)
// and fails on an issue of severity error or fatal, naming its code,
// never its diagnostics; warnings and information are logged by count.
func (c *client) checkOutcomes(ctx context.Context, ref string) error {
	u, err := c.resolve(ref)
	if err != nil {
		return err
	}
	resp, err := c.get(ctx, u, "application/fhir+ndjson", nil)
	if err != nil {
		return fmt.Errorf("bulk outcome file: %w", err)
	}
	defer drain(resp)
	if err := checkType(resp, ndjsonTypes...); err != nil {
		return err
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	notes := 0
	for line := 1; ; line++ {
		b, rerr := readLine(br, c.o.MaxLine)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("%w: GET %s line %d: %v", ErrUnavailable, where(u), line, c.creds.redact(transportCause(rerr).Error()))
		}
		if t := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(b), utf8BOM)); len(t) > 0 {
			var head struct {
				ResourceType string `json:"resourceType"`
			}
			// An OperationOutcome needs no id, unlike checkResource's lines.
			if !utf8.Valid(t) || json.Unmarshal(t, &head) != nil || head.ResourceType != "OperationOutcome" {
				return fmt.Errorf("%w: GET %s line %d: not an OperationOutcome", ErrServer, where(u), line)
			}
			if _, code, bad := fhirin.Outcome(t); bad {
				return fmt.Errorf("%w: GET %s line %d: the export reported an error (code %q): it is incomplete; nothing imported", ErrServer, where(u), line, code)
			}
			notes++
		}
		if rerr != nil {
			break
		}
	}
	if notes > 0 {
		c.o.Logger.Info("fhirsync: the export reported warnings or information (no error)", "request", logged("GET", u), "outcomes", notes)
	}
	return nil
}

// poll waits for the export to finish and returns its manifest.
func (c *client) poll(ctx context.Context, status *url.URL) (bulkManifest, error) {
	deadline := c.o.Now().Add(c.o.PollTimeout)
	for i := 0; ; i++ {
		resp, err := c.get(ctx, status, "application/json", nil)
		if err != nil {
			return bulkManifest{}, fmt.Errorf("bulk status: %w", err)
		}
		if resp.StatusCode == http.StatusOK {
			defer resp.Body.Close()
			var m bulkManifest
			if err := decodeJSON(resp, jsonTypes, &m); err != nil {
				return bulkManifest{}, err
			}
			if m.TransactionTime == "" || m.Output == nil {
				return bulkManifest{}, fmt.Errorf("%w: GET %s: not a Bulk Data completion manifest", ErrServer, where(status))
			}
			if err := m.organized(status); err != nil {
				return bulkManifest{}, err
			}
			if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
				m.served = t
			}
			return m, nil
		}
		drain(resp)
		if resp.StatusCode != http.StatusAccepted {
			return bulkManifest{}, fmt.Errorf("%w: GET %s: HTTP %d", ErrServer, where(status), resp.StatusCode)
		}
		c.o.Progress(Progress{Phase: "poll", Detail: quiet(c.creds.redact(resp.Header.Get("X-Progress")))})
		// The server's Retry-After is honoured whole (the Bulk IG's
		// example is 120 s; a client that polls sooner gets 429), not cut
		// to MaxDelay, the cap of retry backoff; the poll deadline bounds it.
		wait := retryAfter(resp.Header, c.o.Now())
		if wait == 0 {
			wait = backoff(min(i, 5), c.o.BaseDelay, c.o.MaxDelay, 0)
		}
		if c.o.Now().Add(wait).After(deadline) {
			return bulkManifest{}, fmt.Errorf("%w: GET %s: export not complete within the poll timeout of %s (the server asks to poll again in %s)", ErrUnavailable, where(status), c.o.PollTimeout, wait.Round(time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return bulkManifest{}, ctx.Err()
		case <-t.C:
		}
	}
}

// download streams one output or deleted file into st. A download that
// breaks off (connection reset, truncated transfer) is tried again, with
// the backoff of any request, up to Options.MaxAttempts times.
func (c *client) download(ctx context.Context, st *stage, ref, typ string, deleted bool) (int, error) {
	u, err := c.resolve(ref)
	if err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.get(ctx, u, "application/fhir+ndjson", nil)
		if err != nil {
			return 0, fmt.Errorf("bulk download: %w", err)
		}
		if err := checkType(resp, ndjsonTypes...); err != nil {
			drain(resp)
			return 0, err
		}
		n, err := st.copyNDJSON(resp.Body, "GET "+where(u), typ, deleted)
		resp.Body.Close()
		if !errors.Is(err, errInterrupted) {
			return n, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if attempt+1 >= c.o.MaxAttempts {
			return 0, fmt.Errorf("%w: %v; gave up after %d attempts", ErrUnavailable, err, attempt+1)
		}
		c.o.Logger.Warn("fhirsync: download broke off; retrying", "request", logged("GET", u), "attempt", attempt+1)
		t := time.NewTimer(backoff(attempt, c.o.BaseDelay, c.o.MaxDelay, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// deleteJob tells the server the export may go — cancelled if it still
// runs, its files released if done (Bulk Data: DELETE on the status URL).
// Best effort, also after the sync's context ended: a failure is logged,
// not an error.
func (c *client) deleteJob(ctx context.Context, status *url.URL) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, status.String(), nil)
	if err != nil {
		return
	}
	if c.auth != nil {
		tok, err := c.auth.token(ctx)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c.requests.Add(1)
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		c.o.Logger.Warn("fhirsync: deleting the finished export job", "request", logged("DELETE", status), "err", quiet(c.creds.redact(transportCause(err).Error())))
		return
	}
	drain(resp)
}
