package ops

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// Redacted replaces the value of an attribute NewJSONLogger redacts.
const Redacted = "[REDACTED]"

// longKeyValue is the length from which a value under a "key" attribute
// is taken for key material and redacted; key ids and versions are
// shorter.
const longKeyValue = 24

// NewJSONLogger returns a logger writing one JSON object per record to w
// (log/slog's JSONHandler), for records at level and above, with this
// filtering applied to every attribute, including those added with With
// and those inside groups (a group's name counts as part of the key):
//
//  1. Secret keys. An attribute whose key, or any enclosing group's
//     name, contains (case-insensitively) "token", "authorization",
//     "password", "passwd", "secret", "cookie", "credential" or
//     "private" has its value replaced by Redacted.
//  2. Key material. An attribute whose key contains "key" (e.g. "key",
//     "hmac_key", "apiKey") and whose value, as text, is at least 24 bytes
//     long has its value replaced by Redacted. Shorter values (key ids
//     such as "cursor-v3") are kept.
//  3. Bearer values. Any string or error value, under any key, that
//     contains "bearer " (case-insensitive) or looks like a JWT (a word
//     starting "eyJ" with two dots) is replaced by Redacted.
//  4. PHI and payloads. In records above slog.LevelDebug, an attribute
//     whose key or enclosing group is (case-insensitively) "payload",
//     "body", "content", "uri", "uris", "patient" or "patients" is
//     dropped entirely. Debug records keep them (after rules 1-3): never
//     enable Debug on real data.
//
// The built-in time, level and msg attributes are never altered: the
// message must be a constant (put variable parts in attributes). Rules are
// applied to the attribute value after LogValuer resolution. Writes to w
// are serialized.
func NewJSONLogger(w io.Writer, level slog.Level) *slog.Logger {
	lw := &lockedWriter{w: w}
	return slog.New(&filterHandler{
		debug: slog.NewJSONHandler(lw, &slog.HandlerOptions{Level: level, ReplaceAttr: replacer(false)}),
		above: slog.NewJSONHandler(lw, &slog.HandlerOptions{Level: level, ReplaceAttr: replacer(true)}),
	})
}

// filterHandler sends Debug (and lower) records to a handler that keeps
// PHI-named attributes and every other record to one that drops them. Both
// share the writer; attributes and groups added with With go to both, so
// each pre-formats them under its own rules.
type filterHandler struct {
	debug, above slog.Handler
}

func (f *filterHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return f.debug.Enabled(ctx, l)
}

func (f *filterHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level <= slog.LevelDebug {
		return f.debug.Handle(ctx, r)
	}
	// PHI-named attributes are removed here, before the JSON handler sees
	// them (ReplaceAttr drops them too, as a backstop): slog's JSONHandler
	// mis-renders the attributes following a group whose contents
	// ReplaceAttr dropped entirely.
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(stripPHI(attrs)...)
	return f.above.Handle(ctx, nr)
}

func (f *filterHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &filterHandler{debug: f.debug.WithAttrs(as), above: f.above.WithAttrs(stripPHI(as))}
}

// stripPHI is as without PHI-named attributes, at any depth; groups left
// empty are removed.
func stripPHI(as []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if isPHIName(a.Key) {
			continue
		}
		a.Value = a.Value.Resolve()
		if a.Value.Kind() == slog.KindGroup {
			g := stripPHI(a.Value.Group())
			if len(g) == 0 {
				continue
			}
			a.Value = slog.GroupValue(g...)
		}
		out = append(out, a)
	}
	return out
}

func (f *filterHandler) WithGroup(name string) slog.Handler {
	return &filterHandler{debug: f.debug.WithGroup(name), above: f.above.WithGroup(name)}
}

// lockedWriter serializes the writes of the two handlers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var (
	secretWords = []string{"token", "authorization", "password", "passwd", "secret", "cookie", "credential", "private"}
	phiNames    = []string{"payload", "body", "content", "uri", "uris", "patient", "patients"}
)

// replacer is the ReplaceAttr of NewJSONLogger; dropPHI applies rule 4.
func replacer(dropPHI bool) func(groups []string, a slog.Attr) slog.Attr {
	return func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 {
			switch a.Key {
			case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey:
				return a
			}
		}
		if dropPHI && (isPHIName(a.Key) || anyOf(groups, isPHIName)) {
			return slog.Attr{}
		}
		if isSecretName(a.Key) || anyOf(groups, isSecretName) {
			return slog.String(a.Key, Redacted)
		}
		text, isText := valueText(a.Value)
		if isText && looksLikeBearer(text) {
			return slog.String(a.Key, Redacted)
		}
		if strings.Contains(strings.ToLower(a.Key), "key") && len(valueString(a.Value, text, isText)) >= longKeyValue {
			return slog.String(a.Key, Redacted)
		}
		return a
	}
}

func anyOf(names []string, f func(string) bool) bool {
	for _, n := range names {
		if f(n) {
			return true
		}
	}
	return false
}

func isPHIName(k string) bool {
	for _, n := range phiNames {
		if strings.EqualFold(k, n) {
			return true
		}
	}
	return false
}

func isSecretName(k string) bool {
	k = strings.ToLower(k)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// valueText is the text of a string or error value.
func valueText(v slog.Value) (string, bool) {
	switch v.Kind() {
	case slog.KindString:
		return v.String(), true
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && err != nil {
			return err.Error(), true
		}
		if b, ok := v.Any().([]byte); ok {
			return string(b), true
		}
	}
	return "", false
}

// valueString is the value as text for the length rule.
func valueString(v slog.Value, text string, isText bool) string {
	if isText {
		return text
	}
	return v.String()
}

// looksLikeBearer reports whether s holds a bearer credential or a JWT.
func looksLikeBearer(s string) bool {
	if strings.Contains(strings.ToLower(s), "bearer ") {
		return true
	}
	for i := 0; ; {
		j := strings.Index(s[i:], "eyJ")
		if j < 0 {
			return false
		}
		start := i + j
		end := start
		for end < len(s) && isB64URL(s[end]) {
			end++
		}
		if strings.Count(s[start:end], ".") >= 2 {
			return true
		}
		i = start + 3
	}
}

func isB64URL(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '='
}
