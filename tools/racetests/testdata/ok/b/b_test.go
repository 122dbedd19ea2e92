package b

import "testing"

func TestSequential(t *testing.T) {}

func TestOther(t *testing.T) {}
