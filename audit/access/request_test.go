package access_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit/access"
)

// TestMalformedRequests: a request that is not exactly one JSON object of
// the operation's request type is a bad request, whatever the operation,
// and records nothing. In particular a second object after the first
// ("{...}{...}", as a client that concatenates requests sends) is not run
// as the first with the rest ignored.
func TestMalformedRequests(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 3)
	s := access.New(l, nil, dir, nil)
	for _, c := range []struct {
		op   access.Op
		body string
	}{
		{access.OpVerify, `{}{}`},
		{access.OpVerify, `{"purpose":"HOPERAT"} {"purpose":"TREAT"}`},
		{access.OpExport, `{"purpose":"HOPERAT","format":"jsonl"}garbage`},
		{access.OpVerify, `null`},
		{access.OpVerify, `[]`},
		{access.OpVerify, `"verify"`},
		{access.OpVerify, ``},
		{access.OpVerify, "  \n"},
		{access.OpVerify, `{"purpose":5}`},
		{access.OpExport, `{"purpose":"HOPERAT","format":"csv","extra":1}`},
		{access.OpProve, `{"purpose":"HOPERAT","seq":-1}`},
		{access.OpProve, `{"purpose":"HOPERAT","seq":"1"}`},
		{access.OpHash, `{"purpose":"PATRQT","patient":["hk1-0123456789abcdef0123456789abcdef"]}`},
		{access.OpVerify, `{"purpose":"HOPERAT"`},
		{access.Op("drop"), `{"purpose":"HOPERAT"}`},
	} {
		var out bytes.Buffer
		_, err := s.Run(context.Background(), alice, c.op, []byte(c.body), &out)
		if !errors.Is(err, access.ErrBadRequest) {
			t.Errorf("%s %q: %v, want ErrBadRequest", c.op, c.body, err)
		}
		if out.Len() != 0 {
			t.Errorf("%s %q: %d bytes of output", c.op, c.body, out.Len())
		}
	}
	if head, _ := l.Head(); head != 3 {
		t.Fatalf("head %d: a malformed request was recorded", head)
	}
	// Whitespace around the one object is fine.
	if _, err := s.Run(context.Background(), alice, access.OpVerify, []byte(" {}\n"), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
}

// TestStaleBundleDirectoriesAreRemoved: the temporary directory of a
// bundle whose process was killed while assembling it (a copy of records)
// is removed by the next process that holds the log; nothing else in the
// data directory is touched.
func TestStaleBundleDirectoriesAreRemoved(t *testing.T) {
	l, dir := openLog(t)
	stale := filepath.Join(dir, ".access-bundle-123456", "bundle")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "records.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, ".access-bundle-note")
	if err := os.WriteFile(other, nil, 0o600); err != nil { // a file, not a bundle directory
		t.Fatal(err)
	}
	access.New(l, nil, dir, nil)
	if _, err := os.Stat(filepath.Dir(stale)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stale bundle directory is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not a bundle directory was removed: %v", err)
	}
}
