package e

import "testing"

// TestStart is another clash, although -exclude e leaves this package out.
func TestStart(t *testing.T) { go func() {}() }
