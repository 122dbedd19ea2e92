package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestCheckExitCodes: a check's problems found exit 1; anything else,
// including a check stopped part way (interrupted, or out of time), is no
// verdict, exit 2: a policy test cut short by Ctrl-C is not a failing
// policy.
func TestCheckExitCodes(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"passed", nil, 0},
		{"problems found", problemsFound(errors.New("2 of 9 policy tests failed")), 1},
		{"bad usage", usagef("check takes exactly one policy DIR"), 2},
		{"unreadable input", errors.New("policy directory: stat nodir: no such file or directory"), 2},
		{"interrupted", problemsFound(fmt.Errorf("policy: compile failed: %w", context.Canceled)), 2},
		{"out of time", problemsFound(fmt.Errorf("policy: %w", context.DeadlineExceeded)), 2},
	} {
		if got := exitCode(verdictExit(c.err)); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}
