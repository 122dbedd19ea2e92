package d

import "testing"

// TestStart is concurrent here and sequential in package c: a clash.
func TestStart(t *testing.T) { go func() {}() }
