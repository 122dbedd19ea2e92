package a

import (
	"sync"
	"testing"
)

func TestGoStatement(t *testing.T) {
	done := make(chan struct{})
	go close(done)
	<-done
}

func TestThroughHelpers(t *testing.T) { helper(t) }

func helper(t *testing.T) { inner(t) }

func inner(t *testing.T) {
	var wg sync.WaitGroup
	wg.Go(func() {})
	wg.Wait()
}

func TestParallel(t *testing.T) { t.Parallel() }

// TestDirective drives the goroutine Start starts.
//
//custos:race
func TestDirective(t *testing.T) { Start(func() {}) }

func TestSequential(t *testing.T) { recursive(3) }

func recursive(n int) int {
	if n == 0 {
		return 0
	}
	return recursive(n - 1)
}

func TestMethodHelper(t *testing.T) { var h hammer; h.run() }

type hammer struct{}

func (hammer) run() { go func() {}() }

func Testlowercase(t *testing.T) { go func() {}() } // not a test: a lower-case letter follows Test
