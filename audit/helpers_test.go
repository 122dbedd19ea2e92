package audit

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// mustOpen opens (creating) an audit log in a fresh t.TempDir(). On cleanup
// it closes the log and runs VerifyFile, failing the test on any problem
// (like bbolt's btesting.MustCreateDB).
func mustOpen(t testing.TB, opts Options) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	return mustOpenPath(t, path, opts), path
}

// mustOpenPath is mustOpen on a given path (to reopen a log).
func mustOpenPath(t testing.TB, path string, opts Options) *Log {
	t.Helper()
	if opts.Node == "" {
		opts.Node = "node-test"
	}
	l, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		mustVerify(t, path)
	})
	return l
}

// mustVerify fails t if VerifyFile reports anything about path.
func mustVerify(t testing.TB, path string) Summary {
	t.Helper()
	sum, err := VerifyFile(context.Background(), path, func(p Problem) {
		t.Errorf("verify %s: %s", filepath.Base(path), p)
	})
	if err != nil {
		t.Errorf("VerifyFile: %v", err)
	}
	if sum.Problems != 0 {
		t.Errorf("VerifyFile: %d problems", sum.Problems)
	}
	return sum
}

// collect runs VerifyFile and returns every problem.
func collect(t testing.TB, path string) ([]Problem, Summary) {
	t.Helper()
	var ps []Problem
	sum, err := VerifyFile(context.Background(), path, func(p Problem) { ps = append(ps, p) })
	if err != nil {
		t.Fatalf("VerifyFile: %v", err)
	}
	if sum.Problems != len(ps) {
		t.Fatalf("Summary.Problems = %d, reported %d", sum.Problems, len(ps))
	}
	return ps, sum
}

// sampleEntry is a plausible read entry; i varies its identifiers.
func sampleEntry(i int) Entry {
	return Entry{
		Action:         ActionResourcesRead,
		Outcome:        OutcomeAllow,
		Reason:         "clinician_care_team",
		Principal:      Principal{Sub: fmt.Sprintf("user-%d", i%7), Roles: []string{"clinician"}, ClientID: "claude"},
		PurposeOfUse:   "TREAT",
		Session:        "sess-1",
		Source:         "127.0.0.1:5555",
		URIs:           []string{fmt.Sprintf("phi://patients/%04d/summary", i)},
		Patients:       []string{fmt.Sprintf("6f1c2a44-0000-4000-8000-%012d", i)},
		Digests:        []string{"sha256:ab12@v2"},
		DecisionID:     fmt.Sprintf("dec-%d", i),
		PolicyRevision: "rev-1",
		Obligations:    []string{"remove:/ssn"},
		// Deliberately unsorted: Append stores them sorted.
		Keys: []string{"cursor=secret/custos/cursor-key@3", "audit-hmac=secret/custos/audit-hmac-key@2"},
	}
}

// sampleKeysSorted is sampleEntry's Keys as Append stores them.
var sampleKeysSorted = []string{"audit-hmac=secret/custos/audit-hmac-key@2", "cursor=secret/custos/cursor-key@3"}

// appendN appends n sample entries and returns the records.
func appendN(t testing.TB, l *Log, n int) []Record {
	t.Helper()
	var out []Record
	for i := 0; i < n; i++ {
		r, err := l.Append(context.Background(), sampleEntry(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

// stepClock returns a Now that advances by step on every call from start.
func stepClock(start time.Time, step time.Duration) func() time.Time {
	var n int64
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	return func() time.Time {
		<-ch
		defer func() { ch <- struct{}{} }()
		n++
		return start.Add(time.Duration(n) * step)
	}
}

// bytesBuffer is a bytes.Buffer that splits JSONL output.
type bytesBuffer struct{ bytes.Buffer }

func (b *bytesBuffer) lines() [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b.Bytes(), []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// appendUntil starts writers goroutines that append sample entries to l
// until stop is closed; the returned function waits for them.
func appendUntil(t testing.TB, l *Log, writers int, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Append(context.Background(), sampleEntry(w*1000+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	return wg.Wait
}
