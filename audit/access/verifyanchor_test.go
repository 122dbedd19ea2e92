package access_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
)

// TestVerifyUnreadableCheckpointsIsNoVerdict: a verification whose data
// directory's checkpoints.jsonl cannot be read (an I/O error, here a
// directory in its place) reached no verdict on the anchors: OpVerify
// fails with the read error (audit verify exits 2), where it reported the
// log as not matching its anchored checkpoints (exit 1, "problems
// found"). A checkpoints.jsonl that reads but holds a bad line, or a
// checkpoint the log does not match, stays a problem found.
func TestVerifyUnreadableCheckpointsIsNoVerdict(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5)
	signer, keys := testVerifierKeys(t, "custos.test/access/audit")
	anchorHead(t, l, dir, signer)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	verify := func() (access.VerifyResult, error) {
		var res access.VerifyResult
		_, err := local.Do(context.Background(), access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}, VerifierKeys: keys},
			func(r io.Reader) error { return decodeJSON(r, &res) })
		return res, err
	}
	if res, err := verify(); err != nil || !res.OK || res.Anchor == nil || !res.Anchor.OK {
		t.Fatalf("intact log: %+v %v", res, err)
	}

	path := filepath.Join(dir, checkpoint.FileName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := verify()
	var pe *fs.PathError
	if err == nil || !errors.As(err, &pe) {
		t.Errorf("unreadable checkpoints.jsonl: result %+v (anchor %+v), error %v; want the read error, no verdict", res, res.Anchor, err)
	}

	// A line that reads but is no checkpoint: a problem found.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append([]byte("not a checkpoint\n"), good...), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := verify(); err != nil || res.OK || res.Anchor == nil || res.Anchor.OK || res.Anchor.Error == "" {
		t.Errorf("corrupt checkpoints.jsonl: result %+v (anchor %+v), error %v; want a failed anchor check", res, res.Anchor, err)
	}
}
