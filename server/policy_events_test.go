package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
)

// TestPolicyHighWaterRoundTrip: the high-water mark a policy/load record
// carries is read back exactly from the record AuditPolicyEvent wrote,
// whatever the previous revision's free text says (a date-like sequence
// is not taken for an identifier by the scrubber).
func TestPolicyHighWaterRoundTrip(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{})
	ctx := context.Background()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	events := []policy.Event{
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r1", BundleDigest: digest, CandidateDigest: digest, Sequence: 2026120501,
			PreviousRevision: "r0 sequence=99", RollbackOverride: "policy: bundle rollback refused: ... sequence 2026120600"},
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r2", BundleDigest: digest, CandidateDigest: digest},
		{Kind: policy.EventRejected, Source: "bundle:/p", Revision: "r2", BundleDigest: digest, CandidateDigest: "sha256:ff", Sequence: 7, Reason: "x",
			// A refused candidate's own claim (candidate_sequence=) is
			// never the mark.
			CandidateRevision: "sha256:ee", CandidateSequence: 99, CandidateKeyID: "k",
			Rollback: &policy.RollbackError{HighWater: policy.HighWater{Sequence: 2026120501, Digest: digest}, Sequence: 2026120411, Digest: "sha256:ff"}},
		{Kind: policy.EventLoaded, Source: "dir:/p", Revision: "dev", CandidateDigest: digest},
	}
	for _, ev := range events {
		if err := f.srv.AuditPolicyEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var got []policy.HighWater
	var oks []bool
	for _, r := range f.records() {
		if !strings.HasPrefix(r.Action, "policy/") {
			continue
		}
		hw, ok, err := server.PolicyHighWater(r)
		if err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
		got, oks = append(got, hw), append(oks, ok)
	}
	want := []policy.HighWater{{Sequence: 2026120501, Digest: digest}, {Digest: digest}, {}, {}}
	wantOK := []bool{true, true, false, false}
	if len(got) != len(want) {
		t.Fatalf("%d policy records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] || oks[i] != wantOK[i] {
			t.Errorf("record %d: %+v %v, want %+v %v", i, got[i], oks[i], want[i], wantOK[i])
		}
	}
	// A rollback refusal names both claims and digests as they are (the
	// scrubber took a date-like sequence for a phone number).
	for _, r := range f.records() {
		if r.Action == server.ActionPolicyReject && !strings.Contains(r.Reason, "rollback_claim=2026120411 rollback_bundle=sha256:ff high_water=2026120501 high_water_bundle="+digest) {
			t.Errorf("rollback refusal recorded as %q", r.Reason)
		}
	}
	bad := audit.Record{Seq: 9, Entry: audit.Entry{Action: server.ActionPolicyLoad, Outcome: audit.OutcomeAllow, PolicyRevision: "r bundle=" + digest, Reason: "candidate=" + digest + " sequence=x"}}
	if _, _, err := server.PolicyHighWater(bad); err == nil {
		t.Error("an unreadable sequence was accepted")
	}
}

// failingAuditKey is a key set whose audit key can be made unavailable (a
// sealed Vault, keys past their staleness).
type failingAuditKey struct {
	*switchKeys
	fail bool
}

func (k *failingAuditKey) AuditKey(ctx context.Context) (secrets.Key, error) {
	if k.fail {
		return secrets.Key{}, errors.New("vault sealed")
	}
	return k.switchKeys.AuditKey(ctx)
}

// A policy load whose record is written without the audit key (rewritten as
// outcome error, audit_key_unavailable, and the load refused) sets no
// high-water mark: read as a load of a bundle without a claim, it had
// switched the rollback protection off at the next start (found by review:
// after such a record the mark was sequence 0 and any bundle passed).
func TestPolicyHighWaterSkipsLoadsThatDidNotTakeEffect(t *testing.T) {
	ks := &switchKeys{}
	ks.set([]secrets.Key{key(1, "secret/custos/cursor-key@1")}, []string{"cursor=secret/custos/cursor-key@1"}, nil)
	fk := &failingAuditKey{switchKeys: ks}
	f := newFixtureKeys(t, "", fk)
	ctx := context.Background()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	ev := policy.Event{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r1", BundleDigest: digest, CandidateDigest: digest, Sequence: 7}
	if err := f.srv.AuditPolicyEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	fk.fail = true
	if err := f.srv.AuditPolicyEvent(ctx, ev); err == nil {
		t.Fatal("a load recorded without the audit key was not refused")
	}
	var last policy.HighWater
	n := 0
	for _, r := range f.records() {
		hw, ok, err := server.PolicyHighWater(r)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			last, n = hw, n+1
		}
	}
	if n != 1 || last != (policy.HighWater{Sequence: 7, Digest: digest}) {
		t.Errorf("%d marks, last %+v; want the one load that took effect, sequence 7", n, last)
	}
	if err := policy.CheckSequence(last, 1, "sha256:old"); err == nil {
		t.Error("an older bundle passes the mark")
	}
	// The refused load's record names what was refused (until h-audit13,
	// audit_key_unavailable alone).
	recs := f.records()
	want := server.ReasonAuditKeyUnavailable + " candidate=" + digest + " sequence=7"
	if r := recs[len(recs)-1]; r.Action != server.ActionPolicyLoad || r.Outcome != audit.OutcomeError || r.Reason != want {
		t.Errorf("the load recorded without the audit key: %s %s %q, want error %q", r.Action, r.Outcome, r.Reason, want)
	}
}

// TestPolicyEventNamesTheSigningKey: a policy/load or policy/reject record
// names the key whose signature verified the bundle in force (key=ID, quoted
// when the id holds a space or a quote, as --policy-key allows), outside
// the scrubbed text, and the high-water mark still reads back.
func TestPolicyEventNamesTheSigningKey(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{})
	ctx := context.Background()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, ev := range []policy.Event{
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r1", BundleDigest: digest, CandidateDigest: digest, Sequence: 3, KeyID: "vault:transit/custos-policy-signing@v2"},
		{Kind: policy.EventRejected, Source: "bundle:/p", Revision: "r1", BundleDigest: digest, CandidateDigest: "sha256:ff", Sequence: 3, KeyID: "team 2026", Reason: "x"},
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r2", BundleDigest: digest, CandidateDigest: digest, KeyID: "123-45-6789"},
	} {
		if err := f.srv.AuditPolicyEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var reasons []string
	for _, r := range f.records() {
		if strings.HasPrefix(r.Action, "policy/") {
			reasons = append(reasons, r.Reason)
			if _, _, err := server.PolicyHighWater(r); err != nil {
				t.Errorf("record %d: %v", r.Seq, err)
			}
		}
	}
	want := []string{
		"candidate=" + digest + " sequence=3 key=vault:transit/custos-policy-signing@v2",
		"candidate=sha256:ff sequence=3 key=\"team 2026\" x",
		"candidate=" + digest + " key=123-45-6789",
	}
	if len(reasons) != len(want) {
		t.Fatalf("reasons %q", reasons)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Errorf("record %d: reason %q, want %q", i, reasons[i], want[i])
		}
	}
}

// watchRejection starts a Reloader over a directory policy that OnEvent
// records through f's server (after hook, if not nil, lets it: hook's
// error is OnEvent's, and nothing is appended), breaks the policy, and
// returns the policy/reject records of the log once one is there and the
// watcher has polled twenty times more.
func watchRejection(t *testing.T, f *fixture, hook func(policy.Event) error) []audit.Record {
	t.Helper()
	return watchRejectionOf(t, f, hook, watchedPolicy+"decision := {\n")
}

// The policy watchRejection starts from, and its tests.
const (
	watchedPolicy      = "package custos.authz\n\ndecision := {\"allow\": false, \"reasons\": [\"none\"], \"obligations\": []}\n"
	watchedPolicyTests = "package custos.authz_test\n\ntest_denies if not data.custos.authz.decision.allow\n"
)

// watchRejectionOf is watchRejection breaking the policy by writing broken
// as its authz.rego.
func watchRejectionOf(t *testing.T, f *fixture, hook func(policy.Event) error, broken string) []audit.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	const good, tests = watchedPolicy, watchedPolicyTests
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz_test.rego"), []byte(tests), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := policy.New(ctx, policy.DirSource{Dir: dir}, policy.ReloaderOptions{OnEvent: func(ev policy.Event) error {
		if hook != nil {
			if err := hook(ev); err != nil {
				return err
			}
		}
		return f.srv.AuditPolicyEvent(context.Background(), ev)
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.Watch(ctx, 5*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	rejections := func() []audit.Record {
		var out []audit.Record
		for _, rec := range f.records() {
			if rec.Action == server.ActionPolicyReject {
				out = append(out, rec)
			}
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); len(rejections()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rejection was never recorded")
		}
	}
	time.Sleep(100 * time.Millisecond) // twenty polls more
	cancel()
	<-done
	return rejections()
}

// TestPolicyRejectionWithoutTheAuditKeyIsRecordedOnce: a rejection whose
// record is appended without the audit key (written as an error, and
// AuditPolicyEvent errs after the append) is on record, and the watcher
// does not record it again. Until h-policy11 the error made it pending,
// and every poll appended one more policy/reject record while the key was
// unavailable (twenty-odd here, where one is right).
func TestPolicyRejectionWithoutTheAuditKeyIsRecordedOnce(t *testing.T) {
	ks := &switchKeys{}
	ks.set([]secrets.Key{key(1, "secret/custos/cursor-key@1")}, []string{"cursor=secret/custos/cursor-key@1"}, nil)
	fk := &failingAuditKey{switchKeys: ks}
	f := newFixtureKeys(t, "", fk)
	var mu sync.Mutex
	hook := func(ev policy.Event) error {
		mu.Lock()
		defer mu.Unlock()
		fk.fail = ev.Kind == policy.EventRejected // the initial load is recorded with the key
		return nil
	}
	recs := watchRejection(t, f, hook)
	if len(recs) != 1 {
		t.Fatalf("%d policy/reject records, want 1", len(recs))
	}
	// It names the candidate refused and why, as one recorded with the key
	// does, after audit_key_unavailable: a policy record holds nothing the
	// key hides. Until h-audit13 the reason was audit_key_unavailable
	// alone, and the log no longer said which candidate was rejected.
	r := recs[0]
	digest, _, _ := strings.Cut(strings.TrimPrefix(r.Reason, server.ReasonAuditKeyUnavailable+" candidate="), " ")
	if r.Outcome != audit.OutcomeError || !strings.HasPrefix(r.Reason, server.ReasonAuditKeyUnavailable+" candidate=sha256:") || len(digest) != len("sha256:")+64 ||
		!strings.Contains(r.Reason, "rego_parse_error") || !strings.HasSuffix(r.Reason, "(candidate "+digest+")") {
		t.Errorf("the rejection recorded without the audit key: outcome %s, reason %q", r.Outcome, r.Reason)
	}
}

// TestPolicyRejectionRecordedLateNamesItsTime: a rejection whose record
// could not be appended at first (the log full, here a hook that refuses
// it once) is recorded at a later poll with the time it happened
// (rejected_at=, in the audit format's time layout), besides the record's
// own time, when it was written. Until h-policy11 the late record carried
// only its write time.
func TestPolicyRejectionRecordedLateNamesItsTime(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{})
	var mu sync.Mutex
	var first time.Time
	hook := func(ev policy.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if ev.Kind == policy.EventRejected && first.IsZero() {
			first = ev.Time
			time.Sleep(20 * time.Millisecond) // the next poll is later
			return errors.New("audit: append: no space left on device")
		}
		return nil
	}
	recs := watchRejection(t, f, hook)
	if len(recs) != 1 {
		t.Fatalf("%d policy/reject records, want 1", len(recs))
	}
	mu.Lock()
	defer mu.Unlock()
	want := "rejected_at=" + first.UTC().Format(audit.TimeLayout)
	if r := recs[0]; !slices.Contains(strings.Fields(r.Reason), want) || !first.Before(r.Time) {
		t.Errorf("late rejection recorded at %s as %q; want %s (the rejection's time) in it", r.Time.Format(audit.TimeLayout), r.Reason, want)
	}
}

// phoneShaped matches the hex of a digest that the phone pattern of the
// scrubber took for a telephone number: ten digits (or eleven, a leading
// 1) between letters.
var phoneShaped = regexp.MustCompile(`(?:^|[^0-9])1?[0-9]{10}(?:[^0-9]|$)`)

// TestPolicyRejectionKeepsTheCandidateDigest: a candidate that does not
// compile is recorded with its digest intact, both in candidate= and in
// the rejection's reason ("(candidate sha256:…)"), whatever digits the
// digest holds. The broken policy is picked so that its digest holds a
// run of ten digits between letters: the scrubber turned that run of the
// reason's copy into [PHONE] (seen "sha256:…[PHONE]c59da"), and the
// record no longer named the bundle refused.
func TestPolicyRejectionKeepsTheCandidateDigest(t *testing.T) {
	scratch := t.TempDir()
	if err := os.WriteFile(filepath.Join(scratch, "authz_test.rego"), []byte(watchedPolicyTests), 0o600); err != nil {
		t.Fatal(err)
	}
	var broken, digest string
	for n := 0; digest == ""; n++ {
		if n == 5000 {
			t.Fatal("no broken policy has a digest with a run of ten digits")
		}
		b := watchedPolicy + "# variant " + strconv.Itoa(n) + "\ndecision := {\n"
		if err := os.WriteFile(filepath.Join(scratch, "authz.rego"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := policy.DirSource{Dir: scratch}.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		if phoneShaped.MatchString(strings.TrimPrefix(d, "sha256:")) {
			broken, digest = b, d
		}
	}
	f := newServerFixture(t, fixtureOptions{})
	recs := watchRejectionOf(t, f, nil, broken)
	if len(recs) != 1 {
		t.Fatalf("%d policy/reject records, want 1", len(recs))
	}
	r := recs[0]
	if !strings.HasPrefix(r.Reason, "candidate="+digest+" ") || !strings.Contains(r.Reason, "(candidate "+digest+")") || !strings.Contains(r.Reason, "rego_parse_error") {
		t.Errorf("the rejection of %s recorded as %q", digest, r.Reason)
	}
}

// TestPolicyRejectionScrubsThePolicyAuthorsText: a rejection's reason
// quotes the candidate's own text (OPA's parse error quotes the line it
// stopped at), which a policy author wrote: the strict scrub applies to it,
// and only the digests custos names are kept whole. Until the follow-up of
// h-scrub2 the whole reason went through ScrubReason, and a telephone
// number in a UUID's shape on the quoted line was recorded whole.
func TestPolicyRejectionScrubsThePolicyAuthorsText(t *testing.T) {
	const phone = "5551234567"
	for _, shaped := range []string{"aaaaaaaa-2024-0305-1234-" + phone + "ab", phone + "abcdef" + phone + "abcdef" + phone} {
		t.Run(shaped, func(t *testing.T) {
			f := newServerFixture(t, fixtureOptions{})
			broken := watchedPolicy + "vip := {\"callback\": \"" + shaped + "\"\n"
			recs := watchRejectionOf(t, f, nil, broken)
			if len(recs) != 1 {
				t.Fatalf("%d policy/reject records, want 1", len(recs))
			}
			r := recs[0]
			if !strings.Contains(r.Reason, "rego_parse_error") {
				t.Fatalf("the rejection recorded as %q: no parse error", r.Reason)
			}
			if strings.Contains(r.Reason, phone) {
				t.Errorf("the rejection's reason keeps the telephone number of the policy's text: %q", r.Reason)
			}
			cand := strings.TrimPrefix(strings.Fields(r.Reason)[0], "candidate=")
			if !strings.HasPrefix(cand, "sha256:") || !strings.Contains(r.Reason, "(candidate "+cand+")") {
				t.Errorf("the rejection's reason %q does not name its candidate %s whole", r.Reason, cand)
			}
		})
	}
}

// TestPolicyRejectNamesTheCandidate: a policy/reject record names the
// rejected candidate's own revision, sequence claim and signing key after
// those of the bundle in force (sequence=, key=), unscrubbed; it named
// only the candidate's digest, so "candidate=<digest> sequence=1 key=k1"
// read as the claims of a candidate signed by k2 claiming 2.
func TestPolicyRejectNamesTheCandidate(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{})
	const (
		inForce   = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		candidate = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
		candRev   = "sha256:5555555555123456789012345678901234567890123456789012345678901234"
	)
	for _, ev := range []policy.Event{
		{Kind: policy.EventRejected, Source: "bundle:/p", Revision: "r1", BundleDigest: inForce, Sequence: 1, KeyID: "k1",
			CandidateDigest: candidate, CandidateRevision: candRev, CandidateSequence: 2026120611, CandidateKeyID: "k 2", Reason: "tests failed"},
		// A load names nothing twice: the candidate is the policy in force.
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r2", BundleDigest: candidate, Sequence: 2, KeyID: "k2",
			CandidateDigest: candidate, CandidateRevision: candRev, CandidateSequence: 2, CandidateKeyID: "k2"},
	} {
		if err := f.srv.AuditPolicyEvent(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range f.records() {
		if strings.HasPrefix(r.Action, "policy/") {
			got = append(got, r.Reason)
		}
	}
	want := []string{
		"candidate=" + candidate + " sequence=1 key=k1 candidate_revision=" + candRev + ` candidate_sequence=2026120611 candidate_key="k 2" tests failed`,
		"candidate=" + candidate + " sequence=2 key=k2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("policy records' reasons\n%q\nwant\n%q", got, want)
	}
}
