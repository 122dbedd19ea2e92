// Package syncbuf is a bytes.Buffer safe for concurrent use: the log sink
// a test reads while the code under test writes to it from its own
// goroutines.
//
// Invariant: every method holds the buffer's lock, so a String never sees
// half of a Write.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a goroutine-safe byte buffer. The zero value is empty and
// ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
