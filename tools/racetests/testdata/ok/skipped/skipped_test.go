package skipped

import "testing"

func TestSkippedGoStatement(t *testing.T) { go func() {}() }
