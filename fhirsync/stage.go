package fhirsync

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-mcp/custos/fhirin"
)

// ManifestName is the completion manifest in a staging directory.
const ManifestName = "manifest.json"

// Manifest is a FHIR Bulk Data completion manifest, as written into the
// staging directory: output and deleted urls are file names relative to it.
type Manifest struct {
	TransactionTime     string         `json:"transactionTime"`
	Request             string         `json:"request"`
	RequiresAccessToken bool           `json:"requiresAccessToken"`
	Output              []ManifestFile `json:"output"`
	Deleted             []ManifestFile `json:"deleted,omitempty"`
	Error               []ManifestFile `json:"error"`
}

// ManifestFile is one file of a Manifest.
type ManifestFile struct {
	Type  string `json:"type"`
	URL   string `json:"url"`
	Count int    `json:"count,omitempty"`
}

// stage is a staging directory being filled.
type stage struct {
	dir     string
	maxLine int
	space   func(need uint64) error // Options.Space; nil: no check
	unseen  int64                   // bytes staged since the last space check
	bytes   uint64                  // bytes staged
	next    map[string]int          // per type (and "deleted"): the next file number
	m       Manifest
	counts  map[string]int // resources per type
	deleted int
	// outcomes counts the search outcomes (warnings, information) the
	// REST pages held and restSearch left out, in each search's first pass.
	outcomes int
	// includes counts the entries with search.mode include the REST
	// pages held and restSearch left out, in each search's first pass.
	includes int
}

func newStage(parent string, maxLine int) (*stage, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "sync-staging-")
	if err != nil {
		return nil, err
	}
	return &stage{dir: dir, maxLine: maxLine, next: map[string]int{}, counts: map[string]int{}, m: Manifest{Output: []ManifestFile{}, Error: []ManifestFile{}}}, nil
}

func (s *stage) remove() { os.RemoveAll(s.dir) }

// file creates the next file of typ ("deleted" for deletions).
func (s *stage) file(typ string) (*os.File, string, error) {
	n := s.next[typ]
	s.next[typ] = n + 1
	name := fmt.Sprintf("%s.%03d.ndjson", typ, n)
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	return f, name, err
}

// copyNDJSON streams r (an NDJSON file at path src, for messages) into a
// new staging file of typ, checking each line: a complete JSON object,
// newline-terminated (the last line may omit it), whose resourceType is
// want (or any type when want is ""). deleted files hold Bundles. It
// returns the number of resources.
func (s *stage) copyNDJSON(r io.Reader, src, typ string, deleted bool) (n int, err error) {
	kind := typ
	if deleted {
		kind = "deleted"
	}
	f, name, err := s.file(kind)
	if err != nil {
		return 0, err
	}
	// A failed copy leaves nothing: the file goes, its number is reused.
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(filepath.Join(s.dir, name))
			s.next[kind]--
		}
	}()
	w := bufio.NewWriterSize(f, 256<<10)
	br := bufio.NewReaderSize(r, 256<<10)
	want := typ
	if deleted {
		want = "Bundle"
	}
	line, dels := 0, 0
	for {
		b, rerr := readLine(br, s.maxLine)
		switch {
		case errors.Is(rerr, errLineTooLong):
			return n, fmt.Errorf("%w: %s line %d: longer than %d bytes", ErrServer, src, line+1, s.maxLine)
		case rerr != nil && !errors.Is(rerr, io.EOF):
			// The connection broke: worth another try (download).
			return n, fmt.Errorf("%w: %s: the download broke off after line %d: %v", errInterrupted, src, line, transportCause(rerr))
		}
		if len(b) > 0 {
			line++
		}
		// A byte order mark may precede a line's JSON text, as custos
		// import reads a file.
		if t := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(b), utf8BOM)); len(t) > 0 {
			if err := checkResource(t, want); err != nil {
				return n, fmt.Errorf("%w: %s line %d: %v", ErrServer, src, line, err)
			}
			if deleted {
				k, err := countDeletions(t)
				if err != nil {
					return n, fmt.Errorf("%w: %s line %d: %v", ErrServer, src, line, err)
				}
				dels += k
			}
			if err := s.staged(len(t) + 1); err != nil {
				return n, err
			}
			w.Write(t)
			w.WriteByte('\n')
			n++
		}
		if rerr != nil { // io.EOF
			break
		}
	}
	if err := w.Flush(); err != nil {
		return n, err
	}
	if err := f.Close(); err != nil {
		return n, err
	}
	mf := ManifestFile{Type: typ, URL: name, Count: n}
	if deleted {
		mf.Type = "Bundle"
		s.m.Deleted = append(s.m.Deleted, mf)
		s.deleted += dels
	} else {
		s.m.Output = append(s.m.Output, mf)
		s.counts[typ] += n
	}
	return n, nil
}

// spaceEvery is how many staged bytes pass between two Options.Space
// checks (shortened by tests).
var spaceEvery int64 = 16 << 20

// staged counts n more bytes staged and asks for space every spaceEvery.
func (s *stage) staged(n int) error {
	s.bytes += uint64(n)
	if s.unseen += int64(n); s.unseen < spaceEvery {
		return nil
	}
	s.unseen = 0
	return s.checkSpace(0)
}

// checkSpace asks Options.Space, if set, for room for need more bytes.
func (s *stage) checkSpace(need uint64) error {
	if s.space == nil {
		return nil
	}
	if err := s.space(need); err != nil {
		return fmt.Errorf("%w: %w", ErrSpace, err)
	}
	return nil
}

// errInterrupted: reading a response body failed (not its content).
var errInterrupted = errors.New("fhirsync: download interrupted")

var errLineTooLong = errors.New("line too long")

// utf8BOM is the UTF-8 byte order mark some Windows tools write before
// a file's first line (RFC 8259 lets a parser ignore it).
var utf8BOM = []byte("\xef\xbb\xbf")

// readLine returns the next line (without its newline) of at most max
// bytes; io.EOF with the last, unterminated line.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > max+1 {
			return nil, errLineTooLong
		}
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		return buf, err
	}
}

// checkResource checks one NDJSON line: a JSON object with resourceType
// want (any when ""), and an id. The error never quotes the line.
func checkResource(b []byte, want string) error {
	var head struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
	}
	if !json.Valid(b) {
		return errors.New("not a complete JSON value (truncated or malformed)")
	}
	// encoding/json takes invalid UTF-8 in strings as valid.
	if !utf8.Valid(b) {
		return errors.New("not UTF-8 (FHIR JSON is UTF-8; another charset's bytes are refused, not guessed)")
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return errors.New("not a JSON object")
	}
	if head.ResourceType == "" {
		return errors.New("no resourceType")
	}
	if want != "" && head.ResourceType != want {
		if !fhirin.IsResourceType(head.ResourceType) {
			// Not a type name but the server's content: never quoted.
			return fmt.Errorf("a resourceType that is no R4 type in a file of type %q", want)
		}
		return fmt.Errorf("resourceType %q in a file of type %q", head.ResourceType, want)
	}
	if head.ID == "" && head.ResourceType != "Bundle" {
		return errors.New("resource without an id")
	}
	return nil
}

// countDeletions checks a deleted-file Bundle and counts its DELETE entries.
func countDeletions(b []byte) (int, error) {
	var bundle struct {
		Entry []struct {
			Request struct {
				Method string `json:"method"`
				URL    string `json:"url"`
			} `json:"request"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil {
		return 0, errors.New("deleted Bundle is malformed")
	}
	for _, e := range bundle.Entry {
		if e.Request.Method != "DELETE" || e.Request.URL == "" {
			return 0, errors.New("deleted Bundle entry without request DELETE Type/id")
		}
	}
	return len(bundle.Entry), nil
}

// stagedRequest is the request the staged manifest names:
// [base]/$export, the server's system-level kick-off URL, whichever way
// the sync fetched (Bulk at any level, or REST search). The importer reads
// the server's base from it, and an absolute reference to that server's
// Patient/7 is then this import's Patient 7 (docs/import.md, "Patient
// compartment"); without it every absolute reference is refused. The base
// carries no credentials, query or fragment (ParseBase).
func stagedRequest(base *url.URL) string {
	return strings.TrimSuffix(base.String(), "/") + "/$export"
}

// finish writes the manifest.
func (s *stage) finish(transactionTime time.Time, request string) error {
	s.m.TransactionTime = transactionTime.UTC().Format(time.RFC3339Nano)
	s.m.Request = request
	sort.SliceStable(s.m.Output, func(i, j int) bool { return s.m.Output[i].URL < s.m.Output[j].URL })
	b, err := json.MarshalIndent(s.m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, ManifestName), append(b, '\n'), 0o600)
}

// total is the number of resources staged.
func (s *stage) total() int {
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

// dropSuperseded removes from the staged deleted files every DELETE entry
// whose resource the staged output holds, and returns how many it
// removed. A resource deleted and created again with the same id (FHIR
// lets an update create a deleted resource again) since _since is in an
// increment's output, as it is at the export's transactionTime, and in a
// deleted file: the importer refuses a resource both deleted and
// imported, and as the state does not advance, every later increment
// would fail the same way. The output wins: it is what the server holds
// (and a deletion after the export's query is in the next increment's
// deleted files). Memory: the deleted resources' Type/id, no more.
func (s *stage) dropSuperseded() (int, error) {
	if len(s.m.Deleted) == 0 {
		return 0, nil
	}
	deleted := map[string]bool{}
	for _, f := range s.m.Deleted {
		err := s.eachLine(f.URL, func(b []byte, _ int) error {
			var bundle deletedBundle
			if err := json.Unmarshal(b, &bundle); err != nil {
				return err
			}
			for _, e := range bundle.Entry {
				if k := deletedKey(e.Request.URL); k != "" {
					deleted[k] = false
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	found := 0
	for _, f := range s.m.Output {
		err := s.eachLine(f.URL, func(b []byte, _ int) error {
			var head struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
			}
			if err := json.Unmarshal(b, &head); err != nil {
				return err
			}
			k := head.ResourceType + "/" + head.ID
			if seen, ok := deleted[k]; ok && !seen {
				deleted[k] = true
				found++
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	if found == 0 {
		return 0, nil
	}
	dropped := 0
	kept := s.m.Deleted[:0]
	for _, f := range s.m.Deleted {
		var out bytes.Buffer
		lines := 0
		err := s.eachLine(f.URL, func(b []byte, _ int) error {
			var bundle map[string]json.RawMessage
			var entries deletedBundle
			if err := json.Unmarshal(b, &bundle); err != nil {
				return err
			}
			if err := json.Unmarshal(b, &entries); err != nil {
				return err
			}
			var raw []json.RawMessage
			if err := json.Unmarshal(bundle["entry"], &raw); err != nil {
				return err
			}
			var keep []json.RawMessage
			for i, e := range entries.Entry {
				if deleted[deletedKey(e.Request.URL)] {
					dropped++
					continue
				}
				keep = append(keep, raw[i])
			}
			if len(keep) == 0 {
				return nil
			}
			if len(keep) < len(raw) {
				bundle["entry"], _ = json.Marshal(keep)
				nb, err := json.Marshal(bundle)
				if err != nil {
					return err
				}
				b = nb
			}
			out.Write(b)
			out.WriteByte('\n')
			lines++
			return nil
		})
		if err != nil {
			return 0, err
		}
		p := filepath.Join(s.dir, f.URL)
		if lines == 0 {
			if err := os.Remove(p); err != nil {
				return 0, err
			}
			continue
		}
		if err := os.WriteFile(p, out.Bytes(), 0o600); err != nil {
			return 0, err
		}
		f.Count = lines
		kept = append(kept, f)
	}
	s.m.Deleted = kept
	s.deleted -= dropped
	return dropped, nil
}

// deletedBundle is the part of a deleted file's Bundle dropSuperseded reads.
type deletedBundle struct {
	Entry []struct {
		Request struct {
			URL string `json:"url"`
		} `json:"request"`
	} `json:"entry"`
}

// deletedKey is the Type/id a DELETE entry's request.url names (Type/id,
// Type/id/_history/v, or an absolute URL ending so), or "".
func deletedKey(ref string) string {
	if i := strings.IndexAny(ref, "?#"); i >= 0 {
		ref = ref[:i]
	}
	seg := strings.Split(strings.Trim(ref, "/"), "/")
	if len(seg) >= 4 && seg[len(seg)-2] == "_history" {
		seg = seg[:len(seg)-2]
	}
	if len(seg) < 2 || !validType(seg[len(seg)-2]) || seg[len(seg)-1] == "" {
		return ""
	}
	return seg[len(seg)-2] + "/" + seg[len(seg)-1]
}
