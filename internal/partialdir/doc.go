// Package partialdir makes the hidden directory a command receives a copy
// of PHI into (a backup, an audit bundle, a compliance package) beside its
// destination OUT, .OUT.partial-*, and owns its lifecycle: backup,
// audit/access and compliance report all go through Staged, so the rules
// below are implemented once.
//
// The lifecycle of a Staged (Stage, then Publish, then perhaps Withdraw,
// and Discard always, deferred):
//
//	staging --Publish ok--> published --Withdraw ok--> gone
//	   |  |                                  +--renamed back, not removed--> staging
//	   |  |                                  +--not renamed back--> published
//	   |  +--Publish failed--> gone
//	   |  +--Publish failed, renamed, not taken back--> published
//	   +--Discard--> gone
//
// Invariants:
//   - The partial directory is made (mode 0700) and locked (flock(2)) by
//     the receiving process before anything is written in it; one a killed
//     process (kill -9, power loss) left behind is unlocked, and the next
//     Stage of the same OUT removes it once it is older than Grace.
//   - OUT appears only complete: Publish renames the partial directory
//     into place (durable.PublishDir: fsynced, an empty OUT replaced, the
//     caller's check run on OUT first). On failure nothing is left: not
//     the partial directory, not a renamed OUT (taken back), and a given
//     empty OUT is made again; a renamed OUT that could not be taken back
//     stays published, whole, and Publish says so with a
//     *NotTakenBackError (never "gone" while OUT holds it).
//   - A failed command leaves nothing at OUT: Withdraw, after Publish,
//     renames OUT back to the partial directory (one atomic step: OUT is
//     never seen incomplete), removes it and makes a given empty OUT again
//     with its mode bits (GivenMode: permissions, setgid, setuid, sticky).
//     A directory at OUT that is no longer the one published is left as it
//     is (an error). A partial directory renamed back but not removed is
//     the command's again: Discard removes it. One that could not be
//     renamed back stays at OUT, whole, and Withdraw says so with a
//     *NotTakenBackError, for the command to tell its operator.
//   - Discard removes the partial directory unless it is published, and
//     releases the lock; the lock is released exactly once, by the first
//     Discard, and held until then (through Publish and Withdraw, so a
//     directory renamed back stays locked until it is removed).
//   - Calls out of order (Publish twice or after Discard, Withdraw before
//     Publish, twice or after Discard, when the lock is gone) return an
//     error naming the step and change nothing; no call but Withdraw ever
//     removes a published OUT.
//
// New, Publish, Withdraw, Remake and GivenMode are the steps Staged is
// made of.
package partialdir
