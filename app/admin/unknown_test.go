package admin

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/access"
)

// TestUnknownRequestsAreJSONErrors: a request for no operation (another
// path, a GET of an operation) is answered with the socket's JSON error,
// as the package promises for every error, not the mux's plain text.
func TestUnknownRequestsAreJSONErrors(t *testing.T) {
	_, _, dir := serveLog(t, nil)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", Path(dir))
	}}}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/verify"},
		{http.MethodPost, "/v1/ping"},
		{http.MethodGet, "/"},
		{http.MethodPost, "/v2/export"},
		{http.MethodDelete, "/v1/export"},
	} {
		req, _ := http.NewRequest(c.method, "http://custos-admin"+c.path, strings.NewReader("{}"))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e access.Error
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || e.Code == "" || resp.StatusCode < 400 {
			t.Errorf("%s %s: %s, %+v (%v); want a JSON error", c.method, c.path, resp.Status, e, err)
		}
	}
}
