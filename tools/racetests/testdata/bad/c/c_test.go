package c

import "testing"

func TestStart(t *testing.T) { Start(func() {}) }
