package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestJSONLoggerRedaction(t *testing.T) {
	const (
		jwt     = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
		keyHex  = "00112233445566778899aabbccddeeff00112233"
		patient = "P-000123"
		uri     = "custos://t1/patients/P-000123/Observation/o1.json"
	)
	tests := []struct {
		name  string
		level slog.Level
		attrs []any
		want  map[string]any // key -> value; nil value means absent
	}{
		{"secret keys", slog.LevelInfo, []any{"token", "abc", "Authorization", "Basic x", "vault_password", "p", "client_secret", "s", "SessionCookie", "c"},
			map[string]any{"token": Redacted, "Authorization": Redacted, "vault_password": Redacted, "client_secret": Redacted, "SessionCookie": Redacted}},
		{"long key material", slog.LevelInfo, []any{"hmac_key", keyHex, "key", "cursor-v3", "apiKey", []byte(keyHex)},
			map[string]any{"hmac_key": Redacted, "key": "cursor-v3", "apiKey": Redacted}},
		{"bearer values anywhere", slog.LevelInfo, []any{"err", errors.New("upstream said: Bearer abc.def"), "header", "bearer xyz", "note", "got " + jwt + " back", "action", "resources/read"},
			map[string]any{"err": Redacted, "header": Redacted, "note": Redacted, "action": "resources/read"}},
		{"phi dropped at info", slog.LevelInfo, []any{"payload", "{...}", "uri", uri, "patient", patient, "Patients", []string{patient}, "outcome", "deny"},
			map[string]any{"payload": nil, "uri": nil, "patient": nil, "Patients": nil, "outcome": "deny"}},
		{"phi dropped at error", slog.LevelError, []any{"URI", uri, "seq", 7},
			map[string]any{"URI": nil, "seq": float64(7)}},
		{"phi kept at debug, secrets still redacted", slog.LevelDebug, []any{"uri", uri, "token", "abc"},
			map[string]any{"uri": uri, "token": Redacted}},
		{"groups", slog.LevelInfo, []any{slog.Group("patient", "id", patient), slog.Group("auth", "token", "t", "sub", "u1")},
			map[string]any{"patient": nil, "auth": map[string]any{"token": Redacted, "sub": "u1"}}},
		{"group emptied by the drop", slog.LevelWarn, []any{slog.Group("meta", "uri", uri), "seq", 3, slog.Group("g", "patients", []string{patient}, "n", 1)},
			map[string]any{"meta": nil, "seq": float64(3), "g": map[string]any{"n": float64(1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := NewJSONLogger(&buf, slog.LevelDebug)
			log.Log(t.Context(), tc.level, "request", tc.attrs...)
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if got["msg"] != "request" || got["level"] == nil || got["time"] == nil {
				t.Fatalf("built-ins altered: %s", buf.String())
			}
			for k, want := range tc.want {
				v, present := got[k]
				if want == nil {
					if present {
						t.Errorf("%s present: %s", k, buf.String())
					}
					continue
				}
				if !present || jsonString(v) != jsonString(want) {
					t.Errorf("%s = %v, want %v (%s)", k, v, want, buf.String())
				}
			}
			out := buf.String()
			for _, leak := range []string{"abc", keyHex, jwt, "Basic x"} {
				if strings.Contains(out, leak) {
					t.Errorf("output leaks %q: %s", leak, out)
				}
			}
			if tc.level > slog.LevelDebug && (strings.Contains(out, patient) || strings.Contains(out, "custos://")) {
				t.Errorf("output leaks PHI: %s", out)
			}
		})
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestJSONLoggerWith checks that attributes bound with With follow the
// same rules, per record level.
func TestJSONLoggerWith(t *testing.T) {
	var buf bytes.Buffer
	log := NewJSONLogger(&buf, slog.LevelDebug).With("patient", "P-9", "authorization", "Bearer zzz", "component", "server")
	log.Info("served")
	info := buf.String()
	buf.Reset()
	log.Debug("detail")
	debug := buf.String()
	if strings.Contains(info, "P-9") || strings.Contains(info, "zzz") || !strings.Contains(info, `"component":"server"`) {
		t.Errorf("info = %s", info)
	}
	if !strings.Contains(debug, "P-9") || strings.Contains(debug, "zzz") {
		t.Errorf("debug = %s", debug)
	}
	buf.Reset()
	NewJSONLogger(&buf, slog.LevelInfo).Debug("hidden")
	if buf.Len() != 0 {
		t.Errorf("debug record logged at Info level: %s", buf.String())
	}
}

func ExampleNewJSONLogger() {
	var buf bytes.Buffer
	log := NewJSONLogger(&buf, slog.LevelInfo)
	log.Info("audit append failed", "action", "resources/read",
		"uri", "custos://t1/patients/P1/Observation/o1.json", "token", "s3cr3t")
	var rec map[string]any
	_ = json.Unmarshal(buf.Bytes(), &rec)
	fmt.Println(rec["action"], rec["token"], rec["uri"])
	// Output: resources/read [REDACTED] <nil>
}
