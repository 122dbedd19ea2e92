package server

import (
	"context"
	"log/slog"
	"strings"
)

// sdkLogger is the logger custos hands the go-sdk. The SDK logs resource
// URIs at Info level ("resource subscribed", "resource updated
// notification sent", with uri=…), and a URI names a patient id, which the
// audit log itself records only as a keyed hash. So the SDK gets warnings
// and errors only, with any uri or name attribute removed; custos's own
// logs say what happened without identifiers. A message that quotes
// client input is replaced by one that does not (sdkQuoting).
func sdkLogger(l *slog.Logger) *slog.Logger { return slog.New(sdkLogHandler{l.Handler()}) }

type sdkLogHandler struct{ h slog.Handler }

// sdkDropped are the attribute keys never passed on.
var sdkDropped = map[string]bool{"uri": true, "name": true, "params": true}

// sdkQuoting maps the start of each SDK log message that quotes client
// input after it to the message logged instead. The stateful HTTP handler
// logs the MCP-Protocol-Version header of every request it refuses for it
// (any string the client sent, up to the size of a header).
var sdkQuoting = map[string]string{
	"rejecting request with protocol version ": "rejecting request with an unsupported protocol version (the stateful handler serves revisions before 2026-07-28)",
}

// sdkClientMistakes are the go-sdk's error-level messages about a
// client's mistake in the protocol, which any caller can cause as often as
// it likes: they are logged as warnings. An error line means the server
// failed (docs/operations.md: a request refused because the audit log,
// the policy or the payload failed), and these were among them.
var sdkClientMistakes = map[string]bool{
	"method removed in the new protocol":   true, // ping, initialize, ... on 2026-07-28
	"duplicate initialize request":         true,
	"method invalid during initialization": true,
	"initialized before initialize":        true,
	"duplicate initialized notification":   true,
}

// sdkMessage is msg with any client input it quotes removed (sdkQuoting).
func sdkMessage(msg string) string {
	for prefix, quiet := range sdkQuoting {
		if strings.HasPrefix(msg, prefix) {
			return quiet
		}
	}
	return msg
}

func (s sdkLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && s.h.Enabled(ctx, l)
}

func (s sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	level := r.Level
	if level > slog.LevelWarn && sdkClientMistakes[r.Message] {
		level = slog.LevelWarn
		if !s.h.Enabled(ctx, level) {
			return nil
		}
	}
	out := slog.NewRecord(r.Time, level, sdkMessage(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !sdkDropped[a.Key] {
			out.AddAttrs(a)
		}
		return true
	})
	return s.h.Handle(ctx, out)
}

func (s sdkLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	kept := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if !sdkDropped[a.Key] {
			kept = append(kept, a)
		}
	}
	return sdkLogHandler{s.h.WithAttrs(kept)}
}

func (s sdkLogHandler) WithGroup(name string) slog.Handler { return sdkLogHandler{s.h.WithGroup(name)} }
