package bundle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/custos-mcp/custos/audit"
)

// derivedChecker runs CheckDerived: it streams each human-format file of
// the bundle (audit.csv, auditevent.ndjson, ocsf.ndjson, whichever are
// present) alongside records.jsonl and compares it byte for byte with
// Format.header followed by Format.render of every record, the code that
// wrote it. The manifest's digests alone would not do: the manifest is not
// signed, so a changed row with an updated digest would pass. Regenerating
// binds every file to records.jsonl, which the signed checkpoint commits to.
type derivedChecker struct {
	v       *bundleVerifier
	files   []*derivedFile
	stopped uint64 // seq of the first line that did not decode (0: none); comparison stops there
	earlier int    // record renderings matched by an earlier custos version's renderer, not this one's
}

// derivedFile is one human-format file being compared.
type derivedFile struct {
	format Format
	file   *os.File
	r      *bufio.Reader
	line   int  // complete lines matched so far
	done   bool // a difference was reported: stop comparing this file
	buf    []byte
}

// openDerived opens the human-format files present in the bundle and
// checks their headers. A listed file that is missing is the manifest
// check's to report.
func (v *bundleVerifier) openDerived() *derivedChecker {
	c := &derivedChecker{v: v}
	for _, f := range Formats {
		fh, err := v.open(f.FileName())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			v.problem(Problem{Check: CheckDerived, Detail: fmt.Sprintf("cannot read %s: %s", f.FileName(), errText(err))})
			continue
		}
		d := &derivedFile{format: f, file: fh, r: bufio.NewReaderSize(v.meter.reader(fh), 256<<10)}
		c.files = append(c.files, d)
		head, err := f.header()
		if err != nil {
			v.problem(Problem{Check: CheckDerived, Detail: fmt.Sprintf("%s: cannot render the header: %v", f.FileName(), err)})
			d.done = true
			continue
		}
		c.expect(d, head, 0)
	}
	return c
}

// formats returns the formats being compared, in file order: examineLine
// renders each record in them.
func (c *derivedChecker) formats() []Format {
	fs := make([]Format, len(c.files))
	for i, d := range c.files {
		fs[i] = d.format
	}
	return fs
}

// record compares the next bytes of each file with the renderings of the
// record seq (rendered[i] for c.files[i]).
func (c *derivedChecker) record(seq uint64, rec audit.Record, rendered [][]byte, renderErr error) {
	if c.stopped != 0 {
		return
	}
	if renderErr != nil {
		c.v.problem(Problem{Seq: seq, Check: CheckDerived, Detail: "the record cannot be rendered: " + renderErr.Error()})
		c.stopped = seq
		return
	}
	for i, d := range c.files {
		want := rendered[i]
		if !d.done && !d.next(want) {
			// A bundle exported by an earlier custos version holds that
			// version's rendering of the record: a function of the same
			// signed record, so not a change after export.
			for _, rd := range earlierRenderers {
				if b, err := d.format.renderAs(rec, rd); err == nil && !bytes.Equal(b, want) && d.next(b) {
					want = b
					c.earlier++
					break
				}
			}
		}
		c.expect(d, want, seq)
	}
}

// next reports whether the next bytes of d are want (false when they
// cannot be looked at without reading them: want is larger than the
// buffer, or the file ends or fails first).
func (d *derivedFile) next(want []byte) bool {
	got, err := d.r.Peek(len(want))
	return err == nil && bytes.Equal(got, want)
}

// stop ends the comparison at seq, whose line does not decode: what the
// files hold from there on cannot be regenerated (the canonical check
// reports the line).
func (c *derivedChecker) stop(seq uint64) {
	if c.stopped == 0 {
		c.stopped = max(seq, 1)
	}
}

// expect reads len(want) bytes of d and reports the first line that
// differs from want (seq 0: the header).
func (c *derivedChecker) expect(d *derivedFile, want []byte, seq uint64) {
	if d.done || len(want) == 0 {
		return
	}
	if cap(d.buf) < len(want) {
		d.buf = make([]byte, len(want))
	}
	got := d.buf[:len(want)]
	n, err := io.ReadFull(d.r, got)
	got = got[:n]
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		c.v.problem(Problem{Seq: seq, Check: CheckDerived, Detail: fmt.Sprintf("reading %s: %s", d.format.FileName(), errText(err))})
		d.done = true
		return
	}
	i := firstDifference(want, got)
	if i < 0 {
		d.line += bytes.Count(want, []byte{'\n'})
		return
	}
	d.done = true
	line := d.line + 1 + bytes.Count(want[:i], []byte{'\n'})
	what := fmt.Sprintf("record seq %d", seq)
	if seq == 0 {
		what = "the header"
	}
	// The verifier regenerates with its own renderer and cannot tell an
	// edit from a bundle exported by a custos version that renders the
	// file differently (docs/audit-format.md, section 13, check 6): the
	// detail names both.
	const otherRenderer = "or was rendered by a custos version that renders it differently (verify the bundle with the exporting version, or export the range again)"
	detail := fmt.Sprintf("%s line %d (%s) differs from its regeneration from records.jsonl: the file was changed after export, %s", d.format.FileName(), line, what, otherRenderer)
	if i >= len(got) {
		detail = fmt.Sprintf("%s ends at line %d, where its regeneration from records.jsonl continues with %s: the file was cut after export, %s", d.format.FileName(), line, what, otherRenderer)
	}
	c.v.problem(Problem{Seq: seq, Check: CheckDerived, Detail: detail})
}

// firstDifference returns the index of the first byte where got differs
// from want (len(got) when got is a proper prefix of want), or -1 when
// they are equal.
func firstDifference(want, got []byte) int {
	for i := range want {
		if i >= len(got) || want[i] != got[i] {
			return i
		}
	}
	return -1
}

// finish reports bytes after the last regenerated line, closes the files
// and records the check's result.
func (c *derivedChecker) finish() {
	var names []string
	for _, d := range c.files {
		names = append(names, d.format.FileName())
		if !d.done && c.stopped == 0 {
			if _, err := d.r.ReadByte(); err == nil {
				c.v.problem(Problem{Check: CheckDerived, Detail: fmt.Sprintf("%s has content after line %d that no record of records.jsonl produces", d.format.FileName(), d.line)})
			}
		}
		d.file.Close()
	}
	switch {
	case c.stopped != 0:
		c.v.result(CheckDerived, false, fmt.Sprintf("not run from seq %d on: a line of records.jsonl does not decode, so the human formats cannot be regenerated", c.stopped))
	case len(names) == 0:
		c.v.result(CheckDerived, true, "no human-format file in the bundle")
	default:
		detail := strings.Join(names, ", ") + " regenerated from records.jsonl (this verifier's renderer) and compared byte for byte"
		if c.earlier > 0 {
			detail += fmt.Sprintf("; %d record rendering(s) are an earlier custos version's (docs/audit-format.md, section 13, check 6)", c.earlier)
		}
		c.v.result(CheckDerived, true, detail)
	}
}
