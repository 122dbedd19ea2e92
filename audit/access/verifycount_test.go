package access_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/access"
)

// TestVerifyCountsEachCheckpointOnce: verify with an anchor directory that
// holds the same checkpoints as the data directory (serve writes every
// one to both) names each checkpoint once. It counted the lines of both
// files: "consistent with 54 anchored checkpoints" for 27 (found running
// 'audit verify --anchor-dir' beside a server).
func TestVerifyCountsEachCheckpointOnce(t *testing.T) {
	l, dir := openLog(t)
	signer, keys := testVerifierKeys(t, "custos.test/n1/audit")
	for range 3 {
		appendN(t, l, 5)
		anchorHead(t, l, dir, signer)
	}
	anchor, err := os.ReadFile(filepath.Join(dir, "checkpoints.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	var res access.VerifyResult
	if _, err := local.Do(context.Background(), access.OpVerify, access.VerifyRequest{VerifierKeys: keys, Anchor: anchor, AnchorName: "elsewhere/checkpoints.jsonl"},
		func(r io.Reader) error { return json.NewDecoder(r).Decode(&res) }); err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Anchor == nil || !strings.HasPrefix(res.Anchor.Checked, "3 anchored checkpoints (") {
		t.Errorf("verify of 3 checkpoints, each in the data directory and the anchor: ok %v, anchor %+v", res.OK, res.Anchor)
	}
}
