package fhirsync

import (
	"strings"
	"sync"
)

// credentials are the secrets one sync has held — the access tokens it
// fetched and the client assertions it signed — so that whatever a server
// or proxy echoes of them (in a Content-Type, a malformed header line
// Go's transport quotes, a manifest's output type, X-Progress) never
// leaves the sync in a message: its error (stderr, the sync/end audit
// record), a log line or a progress report.
type credentials struct {
	mu sync.Mutex
	v  []string
}

// add remembers a credential; nil-safe.
func (c *credentials) add(s string) {
	if c == nil || s == "" {
		return
	}
	c.mu.Lock()
	c.v = append(c.v, s)
	c.mu.Unlock()
}

// redacted stands where a credential was.
const redacted = "[redacted]"

// redact replaces every credential in s with [redacted]; nil-safe.
func (c *credentials) redact(s string) string {
	if c == nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.v {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// redactedError is an error whose message held a credential: the message
// is redacted; errors.Is and errors.As still see the cause.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr is err with every credential redacted from its message.
func (c *credentials) redactErr(err error) error {
	if err == nil {
		return nil
	}
	if msg := c.redact(err.Error()); msg != err.Error() {
		return &redactedError{err: err, msg: msg}
	}
	return err
}
