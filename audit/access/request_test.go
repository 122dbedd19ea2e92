package access_test

import (
	"bytes"
	"context"
	"errors"
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
