package audit

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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
// inclusive, Until exclusive.
type Filter struct {
	Since, Until time.Time
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

func csvRow(r Record) []string {
	j := func(s []string) string { return strings.Join(s, ";") }
	row := []string{
		strconv.Itoa(r.V), strconv.FormatUint(r.Seq, 10), r.EventID, r.Time.UTC().Format(TimeLayout), r.Node,
		r.Action, r.Outcome, r.Reason,
		r.Principal.Sub, j(r.Principal.Roles), r.Principal.ClientID, r.PurposeOfUse, r.Session, r.Source,
		j(r.URIs), j(r.Patients), j(r.Digests), r.DecisionID, r.PolicyRevision,
		j(r.Obligations), strconv.FormatBool(r.Dev), j(r.Keys), r.PrevHash, r.Hash,
	}
	for i, cell := range row {
		row[i] = csvSafe(cell)
	}
	return row
}

// csvSafe neutralizes spreadsheet formula injection (OWASP "CSV
// injection"): a cell that a spreadsheet would evaluate — one starting with
// =, +, -, @, tab or carriage return — is prefixed with a single quote. The
// CSV export is for people; the JSONL export keeps the exact bytes.
func csvSafe(cell string) string {
	if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
		return "'" + cell
	}
	return cell
}

// exportChunk is the number of records read per read transaction; they are
// copied out and written after the transaction ends, so a slow writer does
// not hold the transaction open.
const exportChunk = 1024

// ExportFile writes the records of the audit log at path whose time matches
// filter to w in format f, and returns how many records it wrote. The file is
// opened read-only under a shared lock (ErrLocked if a writer holds it).
// A record that does not decode stops the export with a *CorruptError
// (errors.Is ErrNonCanonical): run VerifyFile.
func ExportFile(ctx context.Context, path string, w io.Writer, f Format, filter Filter) (n int, err error) {
	if f != FormatJSONL && f != FormatCSV {
		return 0, fmt.Errorf("audit: unknown export format %q", f)
	}
	db, err := openReadOnly(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return exportDB(ctx, db, w, f, filter)
}

type exported struct {
	raw []byte
	rec Record
}

func exportDB(ctx context.Context, db *bolt.DB, w io.Writer, f Format, filter Filter) (int, error) {
	var emit func(exported) error
	var flush func() error
	switch f {
	case FormatJSONL:
		bw := bufio.NewWriter(w)
		emit = func(e exported) error {
			bw.Write(e.raw)
			return bw.WriteByte('\n')
		}
		flush = bw.Flush
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(CSVHeader); err != nil {
			return 0, err
		}
		emit = func(e exported) error { return cw.Write(csvRow(e.rec)) }
		flush = func() error { cw.Flush(); return cw.Error() }
	default:
		return 0, fmt.Errorf("audit: unknown export format %q", f)
	}

	n := 0
	var after []byte
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			flush()
			return n, err
		}
		var chunk []exported
		err := db.View(func(tx *bolt.Tx) error {
			records := tx.Bucket(bucketRecords)
			if records == nil {
				return notAuditLog("records bucket missing")
			}
			c := records.Cursor()
			k, v := seekAfter(c, after)
			for i := 0; k != nil && i < exportChunk; i++ {
				after = append(after[:0], k...)
				rec, err := Decode(v)
				if err != nil {
					var seq uint64
					if len(k) == 8 {
						seq = binary.BigEndian.Uint64(k)
					}
					return &CorruptError{Seq: seq, Kind: KindNonCanonical, Detail: "record does not decode; run verify"}
				}
				if filter.match(rec.Time) {
					chunk = append(chunk, exported{raw: append([]byte(nil), v...), rec: rec})
				}
				k, v = c.Next()
			}
			done = k == nil
			return nil
		})
		if err != nil {
			flush()
			return n, err
		}
		for _, e := range chunk {
			if err := emit(e); err != nil {
				return n, err
			}
			n++
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	return n, nil
}
