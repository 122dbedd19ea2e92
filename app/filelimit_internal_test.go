package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// serve warns when the open-file limit is below http.max_connections, the
// ops listener's 32 and a margin of 64 (1,120 with the default 1024),
// naming the figures and the fix; at or above it, it says nothing.
func TestWarnFileLimit(t *testing.T) {
	for _, tc := range []struct {
		limit    uint64
		maxConns int
		warn     bool
	}{
		{1024, 0, true}, // a common soft limit, and the default max_connections
		{1119, 1024, true},
		{1120, 1024, false},
		{65536, 0, false}, // deploy/systemd/custos.service
		{256, 100, false}, // 100 + 32 + 64 = 196
		{195, 100, true},
	} {
		var buf bytes.Buffer
		got := warnFileLimit(slog.New(slog.NewTextHandler(&buf, nil)), tc.limit, tc.maxConns)
		if got != tc.warn || (buf.Len() > 0) != tc.warn {
			t.Errorf("limit %d, max_connections %d: warned %v (%q); want %v", tc.limit, tc.maxConns, got, buf.String(), tc.warn)
			continue
		}
		if tc.warn {
			for _, want := range []string{"level=WARN", "LimitNOFILE", "open_file_limit=", "needed=", "max_connections="} {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("limit %d: the warning %q does not say %q", tc.limit, buf.String(), want)
				}
			}
		}
	}
}
