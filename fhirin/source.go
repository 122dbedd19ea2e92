package fhirin

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// source is one file to read.
type source struct {
	path     string // to open
	name     string // in Where: relative to the directory or manifest given
	ndjson   bool   // NDJSON (else a stream of JSON values)
	gz       bool
	wantType string // every top-level resource must be of this type ("" = any)
	// base is the FHIR server base the file was exported from (its $export
	// manifest's request), "" when unknown.
	base string
}

// custosManifestName is the custos import manifest a directory may hold
// (store.ManifestName; not imported, to keep the dependency arrow one way).
const custosManifestName = "manifest.jsonl"

// Detect reports the format of the file or directory at path. It reads no
// more than it needs: a directory's listing, a file's name and, for a JSON
// file, its top-level keys up to the first that decides.
func Detect(path string) (Format, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FormatUnknown, pathErr(err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, custosManifestName)); err == nil {
			return FormatCustosManifest, nil
		}
		return FormatDir, nil
	}
	if !fi.Mode().IsRegular() {
		// The input is read more than once (Detect's sniff, then Read's two
		// passes): a pipe was consumed by the first read and refused as no
		// FHIR, and a FIFO nobody writes to hung in open(2).
		return FormatUnknown, newError(filepath.Base(path), "", ErrFormat, "not a regular file or a directory (a pipe, a socket or a device): the input is read more than once; save it to a file first")
	}
	name := strings.ToLower(filepath.Base(path))
	switch {
	case strings.HasSuffix(name, ".ndjson"), strings.HasSuffix(name, ".ndjson.gz"):
		return FormatNDJSON, nil
	case name == custosManifestName:
		return FormatCustosManifest, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return FormatUnknown, pathErr(err)
	}
	defer f.Close()
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return FormatUnknown, nil
		}
		defer zr.Close()
		return sniff(zr), nil
	}
	return sniff(f), nil
}

// sniff decides by the first top-level keys: "resourceType" is FHIR,
// "output" (or "transactionTime") an $export manifest, "uri" or "file" a
// custos manifest line. A top-level array is FHIR JSON.
func sniff(r io.Reader) Format {
	dec := json.NewDecoder(skipBOM(bufio.NewReader(r)))
	tok, err := dec.Token()
	if err != nil {
		return FormatUnknown
	}
	if tok == json.Delim('[') {
		return FormatJSON
	}
	if tok != json.Delim('{') {
		return FormatUnknown
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return FormatUnknown
		}
		switch tok {
		case "resourceType":
			return FormatJSON
		case "output", "transactionTime":
			return FormatExportManifest
		case "uri", "file":
			return FormatCustosManifest
		}
		if skipValue(dec) != nil {
			return FormatUnknown
		}
	}
	return FormatUnknown
}

// skipValue consumes one JSON value token by token, keeping none of it.
func skipValue(dec *json.Decoder) error { return skipRest(dec, 0) }

// skipRest consumes the rest of a JSON value whose opening tokens, depth
// of them ('{' or '['), are read.
func skipRest(dec *json.Decoder, depth int) error {
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// pathErr drops the path from an *os.PathError (it may name a patient: a
// Synthea bundle file is named after one); the caller names the place.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return errors.New("fhirin: " + pe.Op + ": " + pe.Err.Error())
	}
	return err
}

// sources lists the files to read for a path of the given format; complete
// is Options.Complete (a full import).
func sources(path string, f Format, complete bool) ([]source, error) {
	switch f {
	case FormatCustosManifest:
		return nil, newError(filepath.Base(path), "", ErrCustosManifest, "import it with the custos manifest importer")
	case FormatNDJSON, FormatJSON:
		return []source{fileSource(path, filepath.Base(path))}, nil
	case FormatExportManifest:
		return manifestSources(path, complete)
	case FormatDir:
		return dirSources(path)
	}
	return nil, newError(filepath.Base(path), "", ErrFormat, "neither a Bulk Data export, a Bundle, a resource, nor a directory of them")
}

// fileSource describes a file by its name: <Type>[.NNN].ndjson[.gz] is
// NDJSON whose lines must be of Type when the name starts with an R4 type.
func fileSource(path, name string) source {
	lower := strings.ToLower(name)
	s := source{path: path, name: name, gz: strings.HasSuffix(lower, ".gz")}
	base := strings.TrimSuffix(lower, ".gz")
	if strings.HasSuffix(base, ".ndjson") {
		s.ndjson = true
		typ, _, _ := strings.Cut(filepath.Base(name), ".")
		if r4Types[typ] {
			s.wantType = typ
		}
	}
	return s
}

// dirSources lists a directory's files in name order: *.ndjson[.gz] and
// *.json[.gz]. Hidden entries are skipped; anything else (a subdirectory,
// another extension, an $export manifest) is an error rather than silently
// left out of the import. OperationOutcome[.NNN].ndjson[.gz] is the
// export's error file, checked (dirOutcomes) and not read as data.
func dirSources(dir string) ([]source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, pathErr(err)
	}
	var out []source
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		lower := strings.TrimSuffix(strings.ToLower(name), ".gz")
		regular := e.Type().IsRegular()
		if e.Type()&fs.ModeSymlink != 0 {
			// A link to a file (an export assembled from links) is
			// that file; one to a directory, or dangling, is not.
			fi, err := os.Stat(filepath.Join(dir, name))
			regular = err == nil && fi.Mode().IsRegular()
		}
		if !regular || !(strings.HasSuffix(lower, ".ndjson") || strings.HasSuffix(lower, ".json")) {
			return nil, newError(name, "", ErrFormat, "a directory may hold only *.ndjson[.gz] and *.json[.gz] files")
		}
		s := fileSource(filepath.Join(dir, name), name)
		if s.ndjson && s.wantType == "OperationOutcome" {
			// The export's error file (Bulk Data error[]), not data.
			if err := dirOutcomes(s.path, name, s.gz); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, newError(filepath.Base(dir), "", ErrFormat, "no *.ndjson or *.json file in the directory")
	}
	slices.SortFunc(out, func(a, b source) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// ExportManifest is a Bulk Data $export complete-status body (the
// manifest): Bulk Data 2.0, and the later editions' names (outcome for
// error, link next for a manifest in pages, outputOrganizedBy). It is the
// one model of a manifest: custos import reads a local one
// (manifestSources), custos sync a served one (fhirsync).
type ExportManifest struct {
	TransactionTime     string         `json:"transactionTime"`
	Request             string         `json:"request"`
	RequiresAccessToken *bool          `json:"requiresAccessToken"`
	OutputOrganizedBy   string         `json:"outputOrganizedBy"`
	Output              []ManifestFile `json:"output"`
	Deleted             []ManifestFile `json:"deleted"`
	Error               []ManifestFile `json:"error"`
	Outcome             []ManifestFile `json:"outcome"`
	Link                []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
}

// ManifestFile is one file of a manifest.
type ManifestFile struct {
	Type  string `json:"type"`
	URL   string `json:"url"`
	Count *int   `json:"count"`
}

// IsReport reports whether f, a file of a manifest's output[], is the
// export's report rather than its data: a file of OperationOutcomes (as
// some servers list their error file), which custos import and custos
// sync read as a file of error[] is (Reports) and never import, since its
// diagnostics may quote a patient and an error in it means the export is
// incomplete, as an export directory's OperationOutcome.ndjson is read
// (dirOutcomes).
func (f ManifestFile) IsReport() bool { return f.Type == "OperationOutcome" }

// ReportFile is a file of an export's report (NDJSON of OperationOutcome):
// At is where the manifest lists it ("error[0]", "outcome[1]",
// "output[2]"), URL its url.
type ReportFile struct{ At, URL string }

// Reports are the manifest's report files, in the order a reader checks
// them before any data: its error[] (Bulk Data 2.0) and outcome[] (later
// editions) files, then the output[] files that are reports (IsReport).
func (m *ExportManifest) Reports() []ReportFile {
	var out []ReportFile
	for _, list := range []struct {
		field string
		files []ManifestFile
	}{{"error", m.Error}, {"outcome", m.Outcome}, {"output", m.Output}} {
		for i, f := range list.files {
			if list.field != "output" || f.IsReport() {
				out = append(out, ReportFile{At: list.field + "[" + itoa(i) + "]", URL: f.URL})
			}
		}
	}
	return out
}

// Next is the URL of the manifest's next page ("" when none).
func (m *ExportManifest) Next() string {
	for _, l := range m.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

// maxManifest bounds an $export manifest's size (its file list).
const maxManifest = 16 << 20

// manifestSources reads an $export manifest: output[] and deleted[] files,
// each a relative path (to the manifest's directory), an absolute path or a
// file: URL. An export that reported an error (an OperationOutcome with an
// issue of severity error or fatal in a file of error[] or outcome[]) is
// incomplete, and importing it as a full sync would retire what it missed:
// it is refused, as is one whose files cannot be read; warnings and
// information are not errors. A manifest that continues on another page
// (link next), which an import of local files cannot follow, and output
// organized by a resource type (outputOrganizedBy) are refused too. For a
// full import (complete), so is an export whose request says it left
// resources out (partialExport): the import would retire them.
func manifestSources(path string, complete bool) ([]source, error) {
	name := filepath.Base(path)
	b, err := readLimited(path, maxManifest)
	if err != nil {
		return nil, newError(name, "", ErrManifest, "%v", err)
	}
	var m ExportManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, newError(name, "", ErrManifest, "not a JSON $export manifest")
	}
	if m.Next() != "" {
		return nil, newError(name, "link", ErrManifest, "the manifest continues on another page (link next), which an import of local files cannot follow: import a complete export (custos sync follows the pages)")
	}
	if p := partialExport(m.Request); complete && p != "" {
		return nil, newError(name, "request", ErrManifest, "the export was asked for %s, so it holds only part of the data, and a full import retires what its input does not hold: import it without --full", p)
	}
	if m.OutputOrganizedBy != "" {
		return nil, newError(name, "outputOrganizedBy", ErrManifest, "output organized by a resource type is not imported: export the output by type")
	}
	dir := filepath.Dir(path)
	for _, r := range m.Reports() {
		if err := exportOutcomes(name, dir, r.At, r.URL); err != nil {
			return nil, err
		}
	}
	var data []int // the indexes of the output files that are data
	for i, f := range m.Output {
		if !f.IsReport() {
			data = append(data, i)
		}
	}
	if len(data) == 0 && len(m.Deleted) == 0 {
		if len(m.Output) > 0 {
			return nil, newError(name, "output", ErrManifest, "no output file of data (an OperationOutcome output is the export's report) and no deleted files")
		}
		return nil, newError(name, "output", ErrManifest, "no output and no deleted files")
	}
	var out []source
	add := func(field string, i int, f ManifestFile) error {
		at := field + "[" + itoa(i) + "]"
		if field == "deleted" && f.Type == "" {
			f.Type = "Bundle" // the later editions leave it out
		}
		if f.Type == "" {
			return newError(name, at+".type", ErrManifest, "missing: an output file's type is required")
		}
		if !r4Types[f.Type] {
			return newError(name, at+".type", ErrManifest, "not an R4 resource type")
		}
		if field == "deleted" && f.Type != "Bundle" {
			return newError(name, at+".type", ErrManifest, "deleted files hold Bundles")
		}
		p, err := localPath(dir, f.URL)
		if err != nil {
			return newError(name, at+".url", ErrManifest, "%v", err)
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return newError(name, at+".url", ErrManifest, "no such file")
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = filepath.Base(p)
		}
		s := fileSource(p, rel)
		s.ndjson, s.wantType, s.base = true, f.Type, exportBase(m.Request)
		out = append(out, s)
		return nil
	}
	for _, i := range data {
		if err := add("output", i, m.Output[i]); err != nil {
			return nil, err
		}
	}
	for i, f := range m.Deleted {
		if err := add("deleted", i, f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// exportOutcomes checks one error[] or outcome[] file of the manifest
// name (NDJSON of OperationOutcome, gzipped when named *.gz, as an output
// file may be): an issue of severity error or fatal
// is an error naming its issue code; a file that cannot be read, or a line
// that is no OperationOutcome, is one too.
func exportOutcomes(name, dir, at, url string) error {
	p, err := localPath(dir, url)
	if err != nil {
		return newError(name, at+".url", ErrManifest, "%v", err)
	}
	b, err := readOutcomeFile(p, strings.HasSuffix(strings.ToLower(p), ".gz"))
	if err != nil {
		return newError(name, at+".url", ErrManifest, "cannot read the export's outcome file: %v", err)
	}
	switch line, failed, code := scanOutcomes(b); {
	case line > 0:
		return newError(name, at+".url", ErrManifest, "line %d of the export's outcome file is not an OperationOutcome", line)
	case failed:
		return newError(name, at, ErrManifest, "the export reported an error%s; import a complete export", issueCode(code))
	}
	return nil
}

// scanOutcomes reads b, an export's error or outcome file (NDJSON of
// OperationOutcome): line is the 1-based number of the first line that is
// no OperationOutcome (0 for none), failed whether an issue before it has
// severity error or fatal, and code that issue's code ("" when it has
// none). It never returns an issue's diagnostics, which may quote a
// patient.
func scanOutcomes(b []byte) (line int, failed bool, code string) {
	for n, l := range bytes.Split(b, []byte{'\n'}) {
		l = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(l), []byte("\xef\xbb\xbf")))
		if len(l) == 0 {
			continue
		}
		isOO, c, f := Outcome(l)
		if !isOO {
			return n + 1, false, ""
		}
		if f {
			return 0, true, c
		}
	}
	return 0, false, ""
}

// issueCode is the words naming an issue code in an error, " (issue code
// C)", or "" for none.
func issueCode(code string) string {
	if code == "" {
		return ""
	}
	return " (issue code " + code + ")"
}

// readOutcomeFile reads an export's error or outcome file at path, of at
// most maxManifest bytes, gunzipped when gz (named *.gz, as fileSource
// reads an output file).
func readOutcomeFile(path string, gz bool) ([]byte, error) {
	b, err := readLimited(path, maxManifest)
	if err == nil && gz {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
			b, err = io.ReadAll(io.LimitReader(zr, maxManifest+1))
			if err == nil && len(b) > maxManifest {
				err = errors.New("file too large")
			}
		}
	}
	return b, err
}

// dirOutcomes checks the export's error file that an export directory
// holds (OperationOutcome[.NNN].ndjson[.gz], name, at path) as
// manifestSources checks the files of a manifest's error[]: an issue of
// severity error or fatal, a line that is no OperationOutcome, or a file
// that cannot be read is an error (ErrValue, as a searchset's outcome is),
// naming the issue code, never the diagnostics. Its OperationOutcomes are
// never imported: they are the export's report, not its data.
func dirOutcomes(path, name string, gz bool) error {
	b, err := readOutcomeFile(path, gz)
	if err != nil {
		return newError(name, "", ErrValue, "cannot read the export's error file: %v", err)
	}
	switch line, failed, code := scanOutcomes(b); {
	case line > 0:
		return newError(name, "", ErrValue, "line %d of the export's error file is not an OperationOutcome", line)
	case failed:
		return newError(name, "", ErrValue, "the export reported an error%s in its error file; import a complete export", issueCode(code))
	}
	return nil
}

// partialExport names the kick-off parameter of an $export request URL
// that makes the export hold part of the data only: _since (what changed
// since), _type or _typeFilter (some types, some resources); "" for none.
// (A Group's or the Patient compartment's export is the population the
// server exports: custos sync runs them as full syncs.)
func partialExport(request string) string {
	_, q, ok := strings.Cut(request, "?")
	if !ok {
		return ""
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return "a query that does not parse"
	}
	for _, p := range []string{"_since", "_type", "_typeFilter"} {
		if _, ok := v[p]; ok {
			return p
		}
	}
	return ""
}

// exportBase returns the FHIR server base of an $export kick-off request
// URL ("https://ehr.example/fhir/Group/g1/$export?_type=Patient" →
// "https://ehr.example/fhir"; also [base]/$export and
// [base]/Patient/$export), "" for anything else.
func exportBase(request string) string {
	u, _, _ := strings.Cut(request, "?")
	u, ok := strings.CutSuffix(strings.TrimSuffix(u, "/"), "/$export")
	if !ok || !strings.Contains(u, "://") {
		return ""
	}
	u = NormURL(u) // compared with restBase's, which is normURL's
	if b, ok := strings.CutSuffix(u, "/Patient"); ok {
		return b
	}
	if i := strings.LastIndexByte(u, '/'); i > 0 && strings.HasSuffix(u[:i], "/Group") {
		return strings.TrimSuffix(u[:i], "/Group")
	}
	return u
}

// localPath resolves a manifest url: a file: URL, an absolute path, or a
// path relative to dir. http(s) URLs are for `custos sync`, not import.
func localPath(dir, raw string) (string, error) {
	if raw == "" {
		return "", errors.New("empty url")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a URL or path")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return "", errors.New("a file: URL on another host")
		}
		return filepath.FromSlash(u.Path), nil
	case "":
		p := filepath.FromSlash(u.Path)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p, nil
	}
	return "", errors.New("not a local file (use custos sync for a server's export)")
}

// readLimited reads a whole file of at most max bytes, without a leading
// UTF-8 byte order mark (as skipBOM; Detect took a manifest with one for
// one, and json.Unmarshal then refused it) and surrounding white space.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, pathErr(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, pathErr(err)
	}
	if int64(len(b)) > max {
		return nil, errors.New("file too large")
	}
	return bytes.TrimSpace(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))), nil
}

// utf16BOM reports whether head starts with a UTF-16 byte order mark (what
// Windows PowerShell 5 writes by default): such a file is not UTF-8, and
// read as UTF-8 it gave one confusing error a line.
func utf16BOM(head []byte) bool {
	return len(head) >= 2 && (head[0] == 0xff && head[1] == 0xfe || head[0] == 0xfe && head[1] == 0xff)
}

// errUTF16 is the detail of an ErrJSON for a UTF-16 file.
const errUTF16 = "UTF-16 (it starts with a UTF-16 byte order mark): FHIR JSON is UTF-8 (RFC 8259 section 8.1), so transcode the file to UTF-8 before importing it"

// gzipMagic reports whether head starts with gzip's magic bytes (RFC 1952):
// a compressed file under a plain name (a download saved as its
// Content-Encoding sent it) read as text gave "not UTF-8" on every line.
func gzipMagic(head []byte) bool {
	return len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b
}

// errGzipped is the detail of an ErrFormat for a gzip file without .gz.
const errGzipped = "gzip-compressed, but not named .gz: name it .ndjson.gz or .json.gz (or decompress it)"

// skipBOM drops a UTF-8 byte order mark at the start of br, which some
// Windows tools write before JSON (RFC 8259 lets a parser ignore it).
func skipBOM(br *bufio.Reader) *bufio.Reader {
	if b, err := br.Peek(3); err == nil && string(b) == "\xef\xbb\xbf" {
		br.Discard(3)
	}
	return br
}
