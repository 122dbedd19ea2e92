package bundle

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const testOrigin = "custos.example-hospital/node-1/audit"

// testKey is a deterministic ed25519 note key named testOrigin (or name).
type testKey struct {
	signer note.Signer
	vkey   string
}

func newTestKey(t testing.TB, name string, seed byte) testKey {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytesOf(seed, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		t.Fatal(err)
	}
	// A note signer key is "PRIVATE+KEY+name+hash+base64(0x01||seed)".
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, v.KeyHash(), b64(append([]byte{1}, priv.Seed()...)))
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{signer: s, vkey: vkey}
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// anchorLine signs the checkpoint (origin, size, root) and returns its
// anchor line.
func (k testKey) anchorLine(t testing.TB, origin string, size int64, root tlog.Hash) []byte {
	t.Helper()
	body := fmt.Sprintf("%s\n%d\n%s\n", origin, size, b64(root[:]))
	msg, err := note.Sign(&note.Note{Text: body}, k.signer)
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(map[string]any{
		"size": size, "root": b64(root[:]), "note": string(msg),
		"time": time.Date(2026, 11, 21, 12, 0, 0, int(size), time.UTC).Format(time.RFC3339Nano),
	})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// memSource is an in-memory Source: canonical records and their tlog tree.
type memSource struct {
	records [][]byte
	tree    memTree
}

func (m *memSource) TreeHead(ctx context.Context) (int64, tlog.Hash, error) {
	n := int64(len(m.records))
	h, err := tlog.TreeHash(n, &m.tree)
	return n, h, err
}
func (m *memSource) ReadHashes(ix []int64) ([]tlog.Hash, error) { return m.tree.ReadHashes(ix) }
func (m *memSource) TreeHash(size int64) (tlog.Hash, error) {
	if size < 0 || size > int64(len(m.records)) {
		return tlog.Hash{}, fmt.Errorf("size %d out of range", size)
	}
	return tlog.TreeHash(size, &m.tree)
}
func (m *memSource) ProveRecord(seq uint64, size int64) (tlog.RecordProof, error) {
	return tlog.ProveRecord(size, int64(seq)-1, &m.tree)
}
func (m *memSource) ProveTree(oldSize, newSize int64) (tlog.TreeProof, error) {
	if oldSize == 0 {
		return tlog.TreeProof{}, nil
	}
	return tlog.ProveTree(newSize, oldSize, &m.tree)
}
func (m *memSource) Records(ctx context.Context, from, to uint64, fn func(uint64, []byte) error) error {
	if from < 1 || to < from || to > uint64(len(m.records)) {
		return fmt.Errorf("records %d..%d out of range", from, to)
	}
	for s := from; s <= to; s++ {
		if err := fn(s, m.records[s-1]); err != nil {
			return err
		}
	}
	return nil
}

var testEpoch = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// testRecord returns a plausible record for seq, cycling through actions
// and outcomes.
func testRecord(seq uint64, prev string) audit.Record {
	i := int(seq)
	e := audit.Entry{
		Action:         audit.ActionResourcesRead,
		Outcome:        audit.OutcomeAllow,
		Reason:         "clinician_care_team",
		Principal:      audit.Principal{Sub: fmt.Sprintf("user-%d", i%7), Roles: []string{"clinician"}, ClientID: "claude-desktop"},
		PurposeOfUse:   "TREAT",
		Session:        "sess-1",
		Source:         "127.0.0.1:5555",
		URIs:           []string{fmt.Sprintf("phi://patients/hk1-%032d/summary", i)},
		Patients:       []string{fmt.Sprintf("hk1-%032d", i)},
		Digests:        []string{"sha256:00aa@v1"},
		DecisionID:     fmt.Sprintf("dec-%d", i),
		PolicyRevision: "rev-1",
		Keys:           []string{"audit-hmac=dev:ephemeral", "cursor=dev:ephemeral"},
	}
	switch i % 4 {
	case 1:
		e.Action, e.URIs = audit.ActionResourcesList, []string{fmt.Sprintf("phi://patients/hk1-%032d/summary", i), fmt.Sprintf("phi://patients/hk1-%032d/summary", i+1)}
	case 2:
		e.Outcome, e.Reason, e.Digests = audit.OutcomeDeny, "not_care_team", nil
	case 3:
		e.Outcome, e.Reason, e.Digests = audit.OutcomeError, "policy_error", nil
	}
	return audit.Record{
		V: audit.FormatVersion, Entry: e, EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Seq: seq,
		Time: testEpoch.Add(time.Duration(i) * time.Millisecond), Node: "node-1", PrevHash: prev,
	}
}

// newMemSource builds n chained records in memory.
func newMemSource(t testing.TB, n int) *memSource {
	t.Helper()
	m := &memSource{}
	prev := audit.ZeroHash
	for s := uint64(1); s <= uint64(n); s++ {
		b := audit.Encode(testRecord(s, prev))
		prev = audit.HashRecord(b)
		m.records = append(m.records, b)
		m.tree.add(t, b)
	}
	return m
}

// openRealLog creates an audit log in t.TempDir() and appends n entries.
// The log is verified on cleanup.
func openRealLog(t testing.TB, n int) *audit.Log {
	t.Helper()
	l, _ := audittest.Open(t, audit.Options{Node: "node-1", MaxBatchDelay: time.Microsecond})
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		if _, err := l.Append(ctx, testRecord(uint64(i), "").Entry); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// checkpoints signs checkpoints of src at the given sizes.
func checkpoints(t testing.TB, k testKey, src Source, sizes ...int64) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range sizes {
		root, err := src.TreeHash(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k.anchorLine(t, testOrigin, s, root))
	}
	return out
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
