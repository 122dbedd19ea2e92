package admin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestSyncRoute: POST /v1/sync over the real socket hands the kernel's
// peer and the body to Config.Sync and returns its result as JSON; an
// *access.Error keeps its code, another error is sync_failed; a server
// without Sync answers not_found.
//
//custos:race
func TestSyncRoute(t *testing.T) {
	l, path := audittest.Open(t, audit.Options{Node: "n1"})
	dir := filepath.Dir(path)
	var gotCaller access.Caller
	var gotBody string
	fail := error(nil)
	s, err := Listen(Path(dir), Config{Service: access.New(l, nil, dir, nil),
		Sync: func(_ context.Context, c access.Caller, body []byte) (any, error) {
			gotCaller, gotBody = c, string(body)
			if fail != nil {
				return nil, fail
			}
			return map[string]int{"resources": 7}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	c, err := Dial(ctx, Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var out struct{ Resources int }
	if err := c.Sync(ctx, map[string]any{"base": "http://x/fhir", "full": true}, &out); err != nil || out.Resources != 7 {
		t.Fatalf("Sync = %+v, %v", out, err)
	}
	if gotCaller.Account != access.Account(uint32(os.Getuid())) || gotCaller.Source != SocketName || gotBody != `{"base":"http://x/fhir","full":true}` {
		t.Fatalf("caller %+v body %s", gotCaller, gotBody)
	}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{&access.Error{Code: "busy", Message: "a sync runs"}, "busy"},
		{errors.New("fhirsync: FHIR server unavailable: GET /fhir/metadata: HTTP 503"), "sync_failed"},
	} {
		fail = tc.err
		var ae *access.Error
		if err := c.Sync(ctx, map[string]any{}, &out); !errors.As(err, &ae) || ae.Code != tc.code {
			t.Fatalf("error %v: got %v, want code %s", tc.err, err, tc.code)
		}
	}

	// A server without Sync.
	l2, path2 := audittest.Open(t, audit.Options{Node: "n2"})
	dir2 := filepath.Dir(path2)
	s2, err := Listen(Path(dir2), Config{Service: access.New(l2, nil, dir2, nil)})
	if err != nil {
		t.Fatal(err)
	}
	go s2.Serve()
	defer s2.Shutdown(context.Background())
	c2, err := Dial(ctx, Path(dir2))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	var ae *access.Error
	if err := c2.Sync(ctx, map[string]any{}, &out); !errors.As(err, &ae) || ae.Code != "not_found" {
		t.Fatalf("no Sync: %v, want not_found", err)
	}
}
