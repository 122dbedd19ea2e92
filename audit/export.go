package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Format is an export format.
type Format string

// Export formats.
const (
	// FormatJSONL writes each record's exact stored canonical bytes followed
	// by one "\n": line i re-hashes (HashRecord) to record i's hash.
	FormatJSONL Format = "jsonl"
	// FormatCSV writes a header row (CSVHeader) and one row per record, list
	// fields joined by ";". For people and spreadsheets; JSONL is the
	// authoritative form.
	FormatCSV Format = "csv"
)

// Filter selects records by time. Zero bounds are unbounded; Since is
// inclusive, Until exclusive. To, if not 0, ends the export after record
// To (a prefix 1..To pinned by the caller: records appended meanwhile are
// left out).
type Filter struct {
	Since, Until time.Time
	To           uint64
	// Progress, if not nil, is called after each chunk's output is
	// written, outside its read transaction, with the seq of the last
	// record the chunk read (matching or not): the export has read
	// records 1..seq of 1..To. It gets no record contents.
	Progress func(seq uint64)
}

func (f Filter) match(t time.Time) bool {
	if !f.Since.IsZero() && t.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !t.Before(f.Until) {
		return false
	}
	return true
}

// CSVHeader is the header row of FormatCSV, in column order: the canonical
// key order (principal flattened) plus the record hash. "keys" is empty for
// v1 records, which did not record key versions; "v" tells them apart from
// v2 records that recorded none.
var CSVHeader = []string{
	"v", "seq", "event_id", "time", "node", "action", "outcome", "reason",
	"sub", "roles", "client_id", "purpose_of_use", "session", "source",
	"uris", "patients", "digests", "decision_id", "policy_revision",
	"obligations", "dev", "keys", "prev_hash", "hash",
}

// csvRow fills row (len(CSVHeader) cells, reused between records) with r's
// cells, each passed through CSVCell.
func csvRow(r *Record, row []string) []string {
	j := CSVList
	row = append(row[:0],
		strconv.Itoa(r.V), strconv.FormatUint(r.Seq, 10), r.EventID, r.Time.UTC().Format(TimeLayout), r.Node,
		r.Action, r.Outcome, r.Reason,
		r.Principal.Sub, j(r.Principal.Roles), r.Principal.ClientID, r.PurposeOfUse, r.Session, r.Source,
		j(r.URIs), j(r.Patients), j(r.Digests), r.DecisionID, r.PolicyRevision,
		j(r.Obligations), strconv.FormatBool(r.Dev), j(r.Keys), r.PrevHash, r.Hash,
	)
	for i, cell := range row {
		row[i] = CSVCell(cell)
	}
	return row
}

// CSVCell is a cell of the CSV export as written: CSVSafe(CSVVisible(cell)).
// It is pure.
func CSVCell(cell string) string { return CSVSafe(CSVVisible(cell)) }

// CSVVisible writes each character of s that a cell must not hold as it
// is as the text of its Go escape (\u202e, \x1b), as Printable does, and
// leaves every other character as it is:
//   - a format character (Unicode category Cf: the bidirectional controls
//     U+061C, U+200E, U+200F, U+202A..U+202E and U+2066..U+2069,
//     zero-width characters, the byte order mark, ...): invisible in a
//     spreadsheet, and a bidirectional control reorders what follows it:
//     a client id or reason holding a right-to-left override displays
//     reversed (Trojan-source spoofing of who read what);
//   - a control character (C0 but tab, line feed and carriage return,
//     which CSVSafe and the CSV quoting handle; DEL; C1) and the line and
//     paragraph separators U+2028, U+2029: an escape sequence (ESC, or
//     C1's CSI) rewrites the screen of whoever reads the file in a
//     terminal, and a vertical tab, a form feed, NEL (U+0085) or a
//     separator breaks the line in editors and line splitters though
//     encoding/csv does not quote the cell for it (a row forged inside a
//     cell). Until h-review48 these were written as stored
//     (CSVVisibleFormat).
//
// The escape names the code point, so what was stored can be read back
// from the cell; a cell that holds the six characters \u202e as text
// looks the same, so JSONL (the exact bytes) is the authority. CSVCell
// escapes before CSVSafe: a cell that began with a NUL then begins with
// the text \x00, no formula start. It is pure.
func CSVVisible(s string) string { return escapeWhere(s, csvHidden) }

// CSVVisibleFormat is CSVVisible as custos wrote it from h-audit12 (bf44145)
// to h-review48: format characters (Cf) escaped, control characters and
// separators as stored. audit/bundle's renderer of those builds uses it.
// It is pure.
func CSVVisibleFormat(s string) string { return escapeWhere(s, isFormat) }

// escapeWhere writes each character of s for which hide holds as the
// text of its escape (writeEscape).
func escapeWhere(s string, hide func(rune) bool) string {
	if !strings.ContainsFunc(s, hide) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hide(r) {
			writeEscape(&b, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// csvHidden reports whether CSVVisible escapes r.
func csvHidden(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	case '\u2028', '\u2029':
		return true
	}
	return unicode.IsControl(r) || isFormat(r)
}

// writeEscape writes r as the text of its Go escape without quotes:
// \x1b, \u202e, \n.
func writeEscape(b *strings.Builder, r rune) {
	q := strconv.QuoteRuneToASCII(r)
	b.WriteString(q[1 : len(q)-1])
}

// formulaStarts are the first characters that make a spreadsheet evaluate
// a cell, or that some spreadsheets drop before evaluating it: =, +, -, @
// (OWASP "CSV injection"), tab, CR, LF and NUL (ASVS 5.0 1.2.10), and the
// fullwidth forms of the four that spreadsheets in CJK locales read as
// them.
const formulaStarts = "=+-@\t\r\n\x00＝＋－＠"

// CSVSafe neutralizes spreadsheet formula injection in one cell: a cell
// whose first character is one of formulaStarts is prefixed with a single
// quote, and so is each part of it after a ";" or a tab, which a
// spreadsheet that splits cells at them (";" is the list separator of many
// locales; encoding/csv quotes a cell only for a comma, a quote or a line
// break) reads as a cell of its own. The CSV export is for people; the
// JSONL export keeps the exact bytes. It is pure.
func CSVSafe(cell string) string {
	if !strings.ContainsAny(cell, ";\t") {
		return csvSafePart(cell)
	}
	var b strings.Builder
	start := 0 // the part cell[start:] begins a cell for such a spreadsheet
	for i := 0; i < len(cell); i++ {
		if c := cell[i]; c == ';' || c == '\t' {
			b.WriteString(csvSafePart(cell[start : i+1]))
			start = i + 1
		}
	}
	b.WriteString(csvSafePart(cell[start:]))
	return b.String()
}

// csvSafePart prefixes s with a single quote when it begins with one of
// formulaStarts.
func csvSafePart(s string) string {
	if first, _ := utf8.DecodeRuneInString(s); s != "" && strings.ContainsRune(formulaStarts, first) {
		return "'" + s
	}
	return s
}

// Printable returns s as text a person reads in a terminal or a transcript:
// each character that is not printable — control characters (C0, DEL,
// C1: a newline that would forge a row, a tab that would shift a column,
// an escape sequence that would rewrite the screen or the clipboard),
// format characters (bidi overrides, zero-width characters, the byte order
// mark), line and paragraph separators and every space but U+0020 — is
// written as its Go escape (\n, \t, \x1b, \u202e, ...), and each byte
// that is not UTF-8 as \xNN. Printable text is returned unchanged. The
// records keep the exact text (JSONL, --json); this is for the renderings
// made for people. It is pure.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			writeEscape(&b, r)
		}
		i += n
	}
	return b.String()
}

// CSVList is a list cell: its elements, each made safe by CSVSafe (a
// spreadsheet that splits cells at ";" would otherwise evaluate an element
// after the first), joined by ";".
func CSVList(elems []string) string {
	safe := make([]string, len(elems))
	for i, e := range elems {
		safe[i] = CSVSafe(e)
	}
	return strings.Join(safe, ";")
}

// exportChunk is the number of records read per read transaction. Each
// chunk is formatted into a buffer inside its transaction and written to the
// destination after the transaction ends, in one Write: a slow destination
// never holds a read transaction open (which would block bbolt's remapping
// of a growing file), and the per-record cost is the Decode plus the
// formatting, with no per-record copies or writes.
const exportChunk = 1024

// ExportFile writes the records of the audit log at path whose time matches
// filter to w in format f, and returns how many records it wrote. The file is
// opened read-only under a shared lock (ErrLocked if a writer holds it).
// Records are read in chunks of exportChunk per read transaction and written
// to w once per chunk, so w needs no buffering. Every record is decoded
// (Decode), whatever the format: a record that does not decode stops the
// export with a *CorruptError (errors.Is ErrNonCanonical) naming its seq — run
// VerifyFile. On an error, n counts the records of the chunks already
// written to w.
//
// Each record written is checked against what the walk has read (not a
// verification: VerifyFile is): its bytes hash to its stored hash, and its
// prev_hash is the stored hash of the record before it. A record that
// fails does not stop the export, whose output is then the records as
// stored, every one asked for: the error is then an *ExportDamagedError
// (errors.Is ErrExportDamaged and ErrCorrupt) naming the first problem,
// and n counts every record written.
func ExportFile(ctx context.Context, path string, w io.Writer, f Format, filter Filter) (n int, err error) {
	if f != FormatJSONL && f != FormatCSV {
		return 0, fmt.Errorf("audit: unknown export format %q", f)
	}
	segs, err := openFileSegments(path)
	if err != nil {
		return 0, err
	}
	defer closeSegments(segs)
	return exportSegments(ctx, segs, w, f, filter, nil)
}

// exportSegments exports the records of segs (in order) as ExportFile
// does. between, if not nil, runs each chunk's output and progress
// (outside the chunk's read transaction) and may stop the export with an
// error (Log.unheld).
func exportSegments(ctx context.Context, segs []*segment, w io.Writer, f Format, filter Filter, between func(func() error) error) (int, error) {
	if between == nil {
		between = func(fn func() error) error { return fn() }
	}
	var buf bytes.Buffer // one chunk's output
	var cw *csv.Writer
	var row []string
	switch f {
	case FormatJSONL:
	case FormatCSV:
		cw = csv.NewWriter(&buf)
		row = make([]string, 0, len(CSVHeader))
		if err := cw.Write(CSVHeader); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("audit: unknown export format %q", f)
	}

	n := 0
	var chk exportCheck
	for _, s := range segs {
		if filter.To != 0 && s.base >= filter.To {
			break
		}
		m, err := exportSegment(ctx, s, &buf, cw, row, w, filter, between, &chk)
		n += m
		if err != nil {
			return n, err
		}
	}
	if chk.problems > 0 {
		return n, &ExportDamagedError{Records: n, Problems: chk.problems, First: chk.first}
	}
	return n, nil
}

// exportCheck checks each record an export writes against what the walk
// has read: its bytes hash to its stored hash (hashes bucket), and its
// prev_hash is the stored hash of the record before it. It is not a
// verification (VerifyFile checks the tree, the seals, the head, time
// order, ...): it keeps an export of a record changed in place, or of a
// chain relinked around one, from passing as an export of an intact log.
type exportCheck struct {
	prev     string // the stored hash of the record read last; "" unknown
	problems int
	first    Problem
}

func (c *exportCheck) problem(p Problem) {
	if c.problems == 0 {
		c.first = p
	}
	c.problems++
}

// enter sets the hash the first record of segment s must link to when no
// record was read before it: its recorded predecessor's (ZeroHash for
// the log's first segment).
func (c *exportCheck) enter(tx *bolt.Tx) {
	if c.prev != "" {
		return
	}
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if m, err := readSegmentMeta(meta); err == nil {
			c.prev = ZeroHash
			if m.baseSeq > 0 {
				c.prev = hex.EncodeToString(m.baseHash[:])
			}
		}
	}
}

// record checks record seq (decoded as rec; stored is its hashes entry)
// when exported says it is written, and moves past it.
func (c *exportCheck) record(seq uint64, stored []byte, rec *Record, exported bool) {
	storedHex := hex.EncodeToString(stored)
	if exported {
		switch {
		case len(stored) != 32:
			c.problem(Problem{Seq: seq, Kind: KindMissingHash, Got: rec.Hash, Detail: "no stored hash for this record"})
		case storedHex != rec.Hash:
			c.problem(Problem{Seq: seq, Kind: KindHashMismatch, Expected: storedHex, Got: rec.Hash, Detail: "record bytes do not hash to the stored hash"})
		}
		if c.prev != "" && rec.PrevHash != c.prev {
			c.problem(Problem{Seq: seq, Kind: KindChainBreak, Expected: c.prev, Got: rec.PrevHash, Detail: "prev_hash is not the previous record's stored hash"})
		}
	}
	c.prev = storedHex
	if len(stored) != 32 {
		c.prev = rec.Hash
	}
}

// exportSegment exports one segment's matching records, formatting each
// chunk into buf (through cw for CSV) inside its transaction and writing
// it to w after, through between.
func exportSegment(ctx context.Context, s *segment, buf *bytes.Buffer, cw *csv.Writer, row []string, w io.Writer, filter Filter, between func(func() error) error, chk *exportCheck) (int, error) {
	n := 0
	var after []byte
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		rows := 0
		err := s.view(func(tx *bolt.Tx) error {
			records := tx.Bucket(bucketRecords)
			if records == nil {
				return notAuditLog("records bucket missing")
			}
			hashes := tx.Bucket(bucketHashes)
			if hashes == nil {
				return notAuditLog("hashes bucket missing")
			}
			chk.enter(tx)
			c := records.Cursor()
			k, v := seekAfter(c, after)
			for i := 0; k != nil && i < exportChunk; i++ {
				if filter.To != 0 && len(k) == 8 && binary.BigEndian.Uint64(k) > filter.To {
					k = nil // past the pinned prefix
					break
				}
				after = append(after[:0], k...)
				rec, err := Decode(v)
				if err != nil {
					var seq uint64
					if len(k) == 8 {
						seq = binary.BigEndian.Uint64(k)
					}
					return &CorruptError{Seq: seq, Kind: KindNonCanonical, Detail: "record does not decode; run verify"}
				}
				exported := filter.match(rec.Time)
				seq := rec.Seq
				if len(k) == 8 {
					seq = binary.BigEndian.Uint64(k)
				}
				chk.record(seq, hashes.Get(k), &rec, exported)
				if exported {
					if cw != nil {
						row = csvRow(&rec, row)
						if err := cw.Write(row); err != nil {
							return err
						}
					} else {
						// The exact stored bytes (v is only valid inside
						// the transaction: copied here).
						buf.Write(v)
						buf.WriteByte('\n')
					}
					rows++
				}
				k, v = c.Next()
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return n, err
		}
		if cw != nil {
			cw.Flush()
			if err := cw.Error(); err != nil {
				return n, err
			}
		}
		err = between(func() error {
			if buf.Len() > 0 {
				if _, err := w.Write(buf.Bytes()); err != nil {
					return err
				}
				buf.Reset()
			}
			n += rows
			if filter.Progress != nil && len(after) == 8 {
				filter.Progress(binary.BigEndian.Uint64(after))
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
