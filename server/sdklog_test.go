package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// The go-sdk's Info lines name resource URIs (patient ids): they are not
// passed on, and a warning keeps its message without uri or name.
func TestSDKLoggerDropsURIs(t *testing.T) {
	var buf bytes.Buffer
	l := sdkLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	const uri = "fhir://general-hospital/patients/7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01/patient/7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01"
	l.Info("resource subscribed", "uri", uri, "session_id", "s1")
	l.With("uri", uri).Warn("resource updated notification failed", "name", uri, "err", "timeout")
	l.WithGroup("g").Error("oops", "uri", uri)
	out := buf.String()
	if strings.Contains(out, "7d1a3c52") {
		t.Fatalf("a patient id reached the log:\n%s", out)
	}
	if strings.Contains(out, "resource subscribed") || !strings.Contains(out, "resource updated notification failed") ||
		!strings.Contains(out, "err=timeout") || !strings.Contains(out, "oops") {
		t.Fatalf("wrong lines kept:\n%s", out)
	}
	if l.Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("Info is enabled for the SDK")
	}
}
