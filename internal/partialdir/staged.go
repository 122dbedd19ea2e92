package partialdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// state is where a Staged's partial directory is.
type state int

const (
	staging   state = iota // the partial directory exists, this command's
	published              // renamed to OUT
	gone                   // removed (Discard, a failed Publish, Withdraw)
)

func (s state) String() string {
	return [...]string{"staging", "published", "gone"}[s]
}

// Staged is the partial directory of one OUT through its lifecycle (see
// the package documentation): Stage makes it, the command fills Dir,
// Publish puts it in place, Withdraw takes it back, Discard (deferred)
// removes what is still the command's and releases the lock. It is not
// safe for concurrent use.
type Staged struct {
	out, dir string
	info     os.FileInfo // dir's, to know it again at OUT (Withdraw)
	given    os.FileMode // the empty OUT given (GivenMode); 0: none
	release  func()      // the lock's; nil once released
	removed  []string
	state    state
}

// Stage makes and locks a new partial directory of out (New), after
// removing those a killed command left behind, and notes the mode of the
// empty out given, if any (GivenMode). The caller checks out first (that
// it is missing or empty, not a link). An error wraps ErrTaken when
// another process took the new directory for one left behind.
func Stage(out string) (*Staged, error) {
	out = filepath.Clean(out)
	given := GivenMode(out)
	dir, release, removed, err := New(out)
	if err != nil {
		return nil, err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		release()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Staged{out: out, dir: dir, info: info, given: given, release: release, removed: removed}, nil
}

// Dir is the partial directory: where the command writes, and reads back
// what it reports, until Publish.
func (s *Staged) Dir() string { return s.dir }

// Removed lists the partial directories left behind by killed commands
// that Stage removed.
func (s *Staged) Removed() []string { return s.removed }

// Publish renames the partial directory, complete, to OUT (see the
// package Publish; check, if not nil, is called on OUT first). On failure
// nothing is left of it, and the error says why, but for one case: the
// rename was done, its parent's fsync failed and OUT could not be taken
// back; then OUT stays published, whole, and the error is a
// *NotTakenBackError. Only once, before Discard.
func (s *Staged) Publish(check func(string) error) error {
	switch {
	case s.release == nil:
		return fmt.Errorf("partialdir: publish of %s after Discard", s.out)
	case s.state != staging:
		return fmt.Errorf("partialdir: publish of %s, which is %s", s.out, s.state)
	}
	if err := Publish(s.dir, s.out, s.info, s.given, check); err != nil {
		if errors.As(err, new(*NotTakenBackError)) {
			s.state = published // renamed, not taken back: OUT holds it, whole
			return err
		}
		os.RemoveAll(s.dir) // not renamed, or renamed back: ours to remove
		s.state = gone
		return err
	}
	s.state = published
	return nil
}

// Withdraw takes back what Publish put at OUT, for a command that failed
// after it (see the package Withdraw). When OUT was renamed back but not
// removed, the partial directory is the command's again and Discard
// removes it; when it was not renamed back, OUT stays published and the
// error is a *NotTakenBackError. Only after Publish, once, before
// Discard (which releases the lock that keeps another command off OUT).
func (s *Staged) Withdraw() error {
	switch {
	case s.release == nil:
		return fmt.Errorf("partialdir: withdraw of %s after Discard", s.out)
	case s.state != published:
		return fmt.Errorf("partialdir: withdraw of %s, which is %s, not published", s.out, s.state)
	}
	err := Withdraw(s.out, s.dir, s.info, s.given)
	switch _, serr := os.Lstat(s.dir); {
	case errors.As(err, new(*NotTakenBackError)):
		// not renamed back: OUT stays published
	case serr == nil:
		s.state = staging // renamed back, not removed
	default:
		s.state = gone
	}
	return err
}

// NotTakenBackError is Withdraw's error (and Publish's, when its parent's
// fsync failed after the rename) when what Publish put at Out is still
// there, whole: it could not be renamed back (Err says why). It is told
// by the failed rename itself, not by comparing OUT with the published
// directory afterwards (an inode freed by a removal may be reused). A
// command then tells its operator that a complete output, a copy of PHI,
// is left at Out.
type NotTakenBackError struct {
	Out string
	Err error
}

func (e *NotTakenBackError) Error() string {
	return fmt.Sprintf("partialdir: %s could not be taken back: %v", e.Out, e.Err)
}

func (e *NotTakenBackError) Unwrap() error { return e.Err }

// Discard removes the partial directory unless it is published (or gone),
// and releases the lock the first time. Safe to call more than once, and
// after any other call.
func (s *Staged) Discard() {
	if s.state == staging {
		if os.RemoveAll(s.dir) == nil {
			s.state = gone
		}
	}
	if s.release != nil {
		s.release()
		s.release = nil
	}
}
