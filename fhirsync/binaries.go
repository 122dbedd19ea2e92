package fhirsync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/store"
)

// Binaries an export leaves out. FHIR servers' Bulk exports (Epic,
// Oracle Health, and the Bulk Data IG itself: Binary is outside the
// Patient compartment, and a client is expected to fetch attachment
// content by its url) hold DocumentReference, DiagnosticReport and Media
// resources whose attachment url names a Binary on the server, without
// the Binary. custos's reader refuses such a link (fhirin.ErrDangling)
// unless the Binary is in the import or live in the catalog, so the sync
// fetches those Binaries (GET [base]/Binary/<id>) into the staging area
// before the import, as if the export had held them.

// attachmentPaths are the Attachment elements the reader lifts out of
// their carrier and whose url must then name a Binary it holds
// (fhirin's attachmentPaths; TestBinaryRefsAgreeWithReader pins the
// agreement): only these fail an import when the Binary is missing. A
// Binary named elsewhere (a Provenance target, a valueAttachment) is a
// mention, which needs no Binary; fetching it would stage a Binary that
// no resource links, which the reader cannot place without a
// securityContext.
var attachmentPaths = map[string]string{
	"DocumentReference": "content.attachment",
	"DiagnosticReport":  "presentedForm",
	"Media":             "content",
}

// binaryRef is one attachment url naming a Binary of the server: the
// Binary's id and where the url is (for messages: the staged file, its
// line and the FHIR path; never the resource's content or patient).
type binaryRef struct {
	ID    string
	Where string
	// ContentType is the media type the attachment declares (its
	// contentType without parameters, lower case), "" if none: a server
	// answering with the content itself must answer this type.
	ContentType string
}

// binaryID returns the id of the Binary the attachment url u names on the
// server at base (normalized, without a trailing slash), as the reader
// reads an attachment url (fhirin's binaryURL over the base of the staged
// manifest's request): "Binary/<id>" or "Binary/<id>/_history/<v>", or an
// absolute URL of that form whose server base is base (its scheme and host
// in any case, as the reader compares them: fhirin.NormURL). A
// url to another server, a urn, a url with a query or fragment, or to
// anything but a Binary names none: the reader keeps it as written, or
// reports it (a url naming another type).
func binaryID(u, base string) (string, bool) {
	if strings.ContainsAny(u, "?#") || strings.HasPrefix(u, "urn:") {
		return "", false
	}
	parts := strings.Split(u, "/")
	if n := len(parts); n >= 4 && parts[n-2] == "_history" {
		parts = parts[:n-2]
	}
	n := len(parts)
	if n < 2 || !fhirin.IsResourceType(parts[n-2]) || !validID(parts[n-1]) {
		return "", false
	}
	if strings.Contains(u, "://") {
		if fhirin.NormURL(strings.Join(parts[:n-2], "/")) != fhirin.NormURL(base) {
			return "", false
		}
	} else if n > 2 {
		return "", false // "a/b/Binary/1" is neither relative nor absolute
	}
	if parts[n-2] != "Binary" {
		return "", false
	}
	return parts[n-1], true
}

// validID reports whether s is a FHIR id: [A-Za-z0-9\-\.]{1,64}.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-") == ""
}

// attachmentRefs calls f for every url naming a Binary of base (binaryID)
// in the lifted attachments (attachmentPaths) of the resource line of type
// typ, with the FHIR path of the url. An attachment with data is inline:
// the reader ignores its url. A line that cannot name a Binary
// (store.MayNameBinary) is not decoded.
func attachmentRefs(line []byte, typ, base string, f func(id, path, contentType string)) error {
	p, ok := attachmentPaths[typ]
	if !ok || !store.MayNameBinary(line) {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return errors.New("not a JSON object")
	}
	var walk func(v any, path, fhirPath string)
	walk = func(v any, path, fhirPath string) {
		name, rest, more := strings.Cut(path, ".")
		obj, _ := v.(map[string]any)
		child, ok := obj[name]
		if !ok {
			return
		}
		visit := func(c any, p string) {
			o, ok := c.(map[string]any)
			switch {
			case !ok:
				// Not an object: the reader's error to report.
			case more:
				walk(o, rest, p)
			default:
				if _, inline := o["data"]; inline {
					return
				}
				if u, ok := o["url"].(string); ok {
					if id, ok := binaryID(u, base); ok {
						ct, _ := o["contentType"].(string)
						mt, _, _ := mime.ParseMediaType(ct)
						if mt == "image/jpg" { // the common misspelling, as the reader reads it
							mt = "image/jpeg"
						}
						f(id, p+".url", mt)
					}
				}
			}
		}
		if arr, ok := child.([]any); ok {
			for i, c := range arr {
				visit(c, fhirPath+"."+name+"["+strconv.Itoa(i)+"]")
			}
			return
		}
		visit(child, fhirPath+"."+name)
	}
	walk(m, p, typ)
	return nil
}

// missingBinaries reads the staged output files and returns the Binaries
// their lifted attachments name on base that no staged Binary file holds,
// each once (its first place), in the order found.
func (s *stage) missingBinaries(base string) ([]binaryRef, error) {
	held := map[string]bool{}
	var refs []binaryRef
	seen := map[string]bool{}
	for _, mf := range s.m.Output {
		_, carrier := attachmentPaths[mf.Type]
		if mf.Type != "Binary" && !carrier {
			continue
		}
		err := s.eachLine(mf.URL, func(line []byte, n int) error {
			if mf.Type == "Binary" {
				var head struct {
					ID string `json:"id"`
				}
				if json.Unmarshal(line, &head) != nil {
					return fmt.Errorf("staged %s line %d: not a JSON object", mf.URL, n)
				}
				held[head.ID] = true
				return nil
			}
			err := attachmentRefs(line, mf.Type, base, func(id, path, ct string) {
				if !seen[id] {
					seen[id] = true
					refs = append(refs, binaryRef{ID: id, Where: fmt.Sprintf("staged %s line %d: %s", mf.URL, n, path), ContentType: ct})
				}
			})
			if err != nil {
				return fmt.Errorf("staged %s line %d: %v", mf.URL, n, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(refs, func(r binaryRef) bool { return held[r.ID] }), nil
}

// eachLine calls f with every non-empty line of the staged file name and
// its number.
func (s *stage) eachLine(name string, f func(line []byte, n int) error) error {
	fh, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return err
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 256<<10)
	for n := 1; ; n++ {
		b, rerr := readLine(br, s.maxLine)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("staged %s line %d: %v", name, n, rerr)
		}
		if len(b) > 0 {
			if err := f(b, n); err != nil {
				return err
			}
		}
		if rerr != nil {
			return nil
		}
	}
}

// fetchBinaries fetches every Binary the staged attachments name on the
// sync's server and the staged data lacks (missingBinaries) and, unless
// full, the catalog does not hold live (BinaryCatalog), with the
// sync's client (its token, retries and redirect rules), and stages them
// as one more Binary file. It returns how many it fetched. A Binary that
// cannot be fetched fails the sync, naming the attachment's place (the
// first such in the attachments' order).
//
// Up to Options.BinaryFetches are fetched at once, in windows of that
// many in the attachments' order: a window's Binaries are staged, in that
// order, once all of them have arrived, so the staged file is the same as
// one fetched serially, and at most a window's answers are held in memory.
// Progress is reported from the caller's goroutine, after each window.
func (c *client) fetchBinaries(ctx context.Context, st *stage, full bool) (int, error) {
	refs, err := st.missingBinaries(strings.TrimSuffix(c.base.String(), "/"))
	if err != nil || len(refs) == 0 {
		return 0, err
	}
	// An increment leaves out what the catalog holds (BinaryCatalog).
	if bc, ok := c.o.Importer.(BinaryCatalog); ok && !full {
		ids := make([]string, len(refs))
		for i, r := range refs {
			ids[i] = r.ID
		}
		live, err := bc.LiveBinaries(ctx, ids)
		if err != nil {
			return 0, fmt.Errorf("%w: asking the catalog which Binaries the staged attachments name are live: %w", ErrImport, err)
		}
		if refs = slices.DeleteFunc(refs, func(r binaryRef) bool { return live[r.ID] }); len(refs) == 0 {
			return 0, nil
		}
	}
	tmp, err := os.CreateTemp(st.dir, ".binaries-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	w := bufio.NewWriterSize(tmp, 256<<10)
	k := max(c.o.BinaryFetches, 1)
	for start := 0; start < len(refs); start += k {
		c.o.Progress(Progress{Phase: "binaries", Detail: fmt.Sprintf("%d of %d", start, len(refs))})
		win := refs[start:min(start+k, len(refs))]
		lines, errs := make([][]byte, len(win)), make([]error, len(win))
		// A failed fetch ends the window's others: the sync fails anyway.
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for j, r := range win {
			wg.Go(func() {
				if lines[j], errs[j] = c.fetchBinary(wctx, r); errs[j] != nil {
					cancel()
				}
			})
		}
		wg.Wait()
		cancel()
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		// The first failure in the attachments' order, not one ended by
		// another's failure (unless there is no other).
		failed := slices.IndexFunc(errs, func(err error) bool { return err != nil && !errors.Is(err, context.Canceled) })
		if failed < 0 {
			failed = slices.IndexFunc(errs, func(err error) bool { return err != nil })
		}
		if failed >= 0 {
			r, err := win[failed], idHidden{errs[failed]}
			hint := ""
			if errors.Is(err, ErrAuth) && c.auth != nil {
				// A --scope listing the export's types leaves Binary out.
				hint = " (the token's scope must cover reading Binary: system/Binary.read, or system/Binary.rs, in --scope)"
			}
			return 0, fmt.Errorf("%s: the Binary its url names is not in the export and could not be fetched: %w%s", r.Where, err, hint)
		}
		for _, line := range lines {
			// Staged twice (here, then copyNDJSON): both count, as a search's pages.
			if err := st.staged(len(line) + 1); err != nil {
				return 0, err
			}
			w.Write(line)
			w.WriteByte('\n')
		}
	}
	c.o.Progress(Progress{Phase: "binaries", Detail: fmt.Sprintf("%d of %d", len(refs), len(refs))})
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return st.copyNDJSON(tmp, "fetched Binaries ("+filepath.Base(tmp.Name())+")", "Binary", false)
}

// fetchBinary is GET [base]/Binary/<id> with Accept: application/fhir+json,
// returning the Binary as one compact JSON line. A server answers with the
// Binary resource (FHIR JSON, base64 data), or with the content itself
// (allowed by R4's "Serving Binary Resources using the RESTful API", and
// what some servers do whatever the Accept): that is wrapped into a Binary
// whose contentType is the answer's Content-Type. The answer may be at
// most Options.MaxLine bytes, and so may the line. A body that breaks off
// is tried again, as a download is.
func (c *client) fetchBinary(ctx context.Context, r binaryRef) ([]byte, error) {
	if r.ID == "." || r.ID == ".." {
		// A FHIR id by the regex, but a dot segment in a URL path: the
		// request would resolve to [base]/ or [base]/Binary/ (the search
		// of every Binary), whose answer is no Binary of this attachment.
		return nil, fmt.Errorf("%w: the Binary's id is a dot segment (%q): GET [base]/Binary/%s would name another resource; not fetched", ErrServer, r.ID, r.ID)
	}
	u, err := c.resolve("Binary/" + r.ID)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.get(ctx, u, "application/fhir+json", nil)
		if err != nil {
			return nil, err
		}
		// The answer's errors name the request made, GET [base]/Binary/<id>
		// (shown as /Binary/[id]), not the path a redirect within the
		// origin led to: the server's file path may name the patient.
		made := *resp.Request
		made.URL = u
		resp.Request = &made
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, int64(c.o.MaxLine)+1))
		resp.Body.Close()
		if rerr == nil {
			return binaryLine(resp, body, r, c.o.MaxLine)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt+1 >= c.o.MaxAttempts {
			return nil, fmt.Errorf("%w: GET %s: the answer broke off: %v; gave up after %d attempts", ErrUnavailable, where(u), c.creds.redact(transportCause(rerr).Error()), attempt+1)
		}
		t := time.NewTimer(backoff(attempt, c.o.BaseDelay, c.o.MaxDelay, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// binaryLine makes the answer body of GET .../Binary/<id> (at most max+1
// bytes read) the staged line of the Binary r names. Content answered
// as itself must be of the type the attachment declares, if it declares
// one: a login page or an error page served with 200 is not the
// document. The error names the request and what is wrong, never the
// body.
func binaryLine(resp *http.Response, body []byte, r binaryRef, max int) ([]byte, error) {
	id := r.ID
	req := "GET " + where(resp.Request.URL)
	if len(body) > max {
		return nil, fmt.Errorf("%w: %s: longer than %d bytes", ErrServer, req, max)
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: no or an unparsable Content-Type", ErrServer, req)
	}
	if slices.Contains(jsonTypes, mt) {
		var head struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
			ContentType  any    `json:"contentType"`
			Data         any    `json:"data"`
		}
		// application/json may be a Binary's own content: only a Binary
		// resource is taken as one; the rest is content.
		isResource := mt != "application/json" || (json.Unmarshal(body, &head) == nil && head.ResourceType == "Binary")
		if isResource {
			if err := checkType(resp, jsonTypes...); err != nil {
				return nil, err
			}
			if err := checkResource(body, "Binary"); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrServer, req, err)
			}
			json.Unmarshal(body, &head)
			switch {
			case head.ID != id:
				return nil, fmt.Errorf("%w: %s: the answer is another Binary (its id differs)", ErrServer, req)
			case head.Data == nil:
				return nil, fmt.Errorf("%w: %s: a Binary without data (its content is not served)", ErrServer, req)
			case !isBase64(head.Data):
				return nil, fmt.Errorf("%w: %s: the Binary's data is not base64", ErrServer, req)
			}
			if ct, _ := head.ContentType.(string); ct == "" {
				return nil, fmt.Errorf("%w: %s: a Binary without a contentType", ErrServer, req)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, body); err != nil {
				return nil, fmt.Errorf("%w: %s: malformed JSON", ErrServer, req)
			}
			return buf.Bytes(), nil
		}
	}
	// The content itself: its type is the answer's, parameters kept.
	if r.ContentType != "" && r.ContentType != mt {
		// Both types are the server's text: each is named only if it is a
		// known media type (namedMediaType).
		return nil, fmt.Errorf("%w: %s: the answer is %s, not a Binary resource nor the %s the attachment declares", ErrServer, req,
			orUnnamed(namedMediaType(mt), "of another type"), orUnnamed(namedMediaType(r.ContentType), "type"))
	}
	ct := mime.FormatMediaType(mt, params)
	if ct == "" {
		return nil, fmt.Errorf("%w: %s: an unusable Content-Type", ErrServer, req)
	}
	if base64.StdEncoding.EncodedLen(len(body)) > max {
		// Measured before it is encoded: the encoding and the line would
		// take about three times the content (four such fetches at once).
		return nil, fmt.Errorf("%w: %s: the content, base64-encoded into a Binary, is longer than %d bytes", ErrServer, req, max)
	}
	line, _ := json.Marshal(struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
		ContentType  string `json:"contentType"`
		Data         string `json:"data"`
	}{"Binary", id, ct, base64.StdEncoding.EncodeToString(body)})
	if len(line) > max {
		return nil, fmt.Errorf("%w: %s: the content, base64-encoded into a Binary, is longer than %d bytes", ErrServer, req, max)
	}
	return line, nil
}

// isBase64 reports whether v is a string of FHIR base64Binary, as the
// reader will decode it (fhirin.ValidBase64).
func isBase64(v any) bool {
	s, ok := v.(string)
	return ok && fhirin.ValidBase64(s)
}

// idHidden is err with every Binary read's path shown as /Binary/[id] in
// its text (hideBinaryIDs, the rule the retry log line follows too): a
// source id may carry PHI (an MRN used as an id), and a sync's error goes
// to stderr and its sync/end audit record. The attachment's place in the
// staged file names which one it was.
type idHidden struct{ err error }

func (e idHidden) Error() string { return hideBinaryIDs(e.err.Error()) }

func (e idHidden) Unwrap() error { return e.err }
