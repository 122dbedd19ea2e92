package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/secrets"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// testOrigin is the checkpoint origin of anchoredDataDir's log.
const testOrigin = "test.example/n1/audit"

// anchoredDataDir is a data directory as serve --dev leaves it: an audit
// log of n records, the dev key file, and a checkpoint of the log's head
// signed with the dev signing key and anchored in checkpoints.jsonl.
func anchoredDataDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	appendRecords(t, dir, n)
	anchorDevCheckpoint(t, dir)
	return dir
}

// appendRecords appends n records to dir's audit log.
func appendRecords(t *testing.T, dir string, n int) {
	t.Helper()
	log := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{})
	defer log.Close()
	for i := range n {
		if _, err := log.Append(context.Background(), audit.Entry{Action: "resources/read", Outcome: audit.OutcomeAllow,
			Reason: fmt.Sprintf("r%d", i), Principal: audit.Principal{Sub: "dr-a", Roles: []string{"clinician"}, ClientID: "c"},
			PurposeOfUse: "TREAT", Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
}

// anchorDevCheckpoint signs a checkpoint of the head of dir's audit log
// with the signing key of dir's dev key file (made if there is none) and
// anchors it in dir, as serve --dev's checkpointer does.
func anchorDevCheckpoint(t *testing.T, dir string) {
	t.Helper()
	log := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{})
	size, root, err := log.TreeHead(context.Background())
	log.Close()
	if err != nil {
		t.Fatal(err)
	}
	anchorCheckpoint(t, dir, checkpoint.Checkpoint{Origin: testOrigin, Size: size, Root: root})
}

// anchorCheckpoint signs c with the signing key of dir's dev key file
// (made if there is none) and anchors it in dir.
func anchorCheckpoint(t *testing.T, dir string, c checkpoint.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	signer, _, err := checkpoint.NewSigner(ctx, testOrigin, keys)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := checkpoint.Sign(c, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&checkpoint.Anchor{Dir: dir}).Append(ctx, signed, c, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// runCLI runs custos with args and returns its exit status, stdout and
// stderr.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestAuditExportBundleJSON: an auditor's script reads what 'audit export
// --out DIR' wrote from --json, one JSON document on stdout, and its values
// are those of the bundle written: the directory, the SHA-256 of its
// manifest.json, the manifest's range, counts and checkpoint sizes, and the
// SHA-256 of every other file, by its name in DIR. There was no --json
// ("unknown flag: --json"). signed_by names the keys that signed the
// bundle's checkpoints, the verifier keys an auditor needs. --json with a single-file export is refused
// (exit 2) before anything is recorded or written.
func TestAuditExportBundleJSON(t *testing.T) {
	data := anchoredDataDir(t, 5)
	out := filepath.Join(t.TempDir(), "bundle")
	code, stdout, stderr := runCLI("audit", "export", "--data-dir", data, "--purpose", "HOPERAT", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("export --out --json: exit %d\n%s%s", code, stdout, stderr)
	}
	var got struct {
		Bundle    string            `json:"bundle"`
		Manifest  string            `json:"manifest"`
		Format    string            `json:"format"`
		Origin    string            `json:"origin"`
		From      uint64            `json:"from"`
		To        uint64            `json:"to"`
		Records   int64             `json:"records"`
		LowerSize int64             `json:"lower_size"`
		UpperSize int64             `json:"upper_size"`
		Files     map[string]string `json:"files"`
		Created   string            `json:"created"`
		SignedBy  []string          `json:"signed_by"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || dec.More() {
		t.Fatalf("export --out --json is not one JSON document: %v\n%s", err, stdout)
	}
	m, err := readManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, bundle.FileManifest))
	if err != nil {
		t.Fatal(err)
	}
	if got.Bundle != out || got.Manifest != fmt.Sprintf("sha256:%x", sha256.Sum256(raw)) || got.Format != bundle.BundleFormat ||
		got.Origin != testOrigin || got.From != 1 || got.To != 5 || got.Records != 5 || got.LowerSize != 0 || got.UpperSize != 5 ||
		got.Created != m.Created {
		t.Errorf("export --out --json = %+v\nmanifest %+v", got, m)
	}
	if len(got.Files) == 0 || len(got.Files) != len(m.Files) {
		t.Errorf("export --out --json files = %v, manifest files %v", got.Files, m.Files)
	}
	for name, digest := range got.Files {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || digest != fmt.Sprintf("sha256:%x", sha256.Sum256(b)) {
			t.Errorf("files[%q] = %s: not the file written (%v)", name, digest, err)
		}
	}
	vkeys := devVerifierFile(t, data)
	if code, _, stderr := runCLI("audit", "verify", "--bundle", out, "--pubkey", vkeys); code != 0 {
		t.Errorf("the bundle written does not verify: exit %d\n%s", code, stderr)
	}
	// signed_by names the key that signed the checkpoints as the verifier
	// file does (origin+hash, the start of its line).
	vk, err := os.ReadFile(vkeys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.SignedBy) != 1 || !strings.HasPrefix(string(vk), got.SignedBy[0]+"+") {
		t.Errorf("export --out --json signed_by = %q; the verifier file holds %q", got.SignedBy, vk)
	}

	// --json describes a bundle: with a single-file export it is refused
	// before the access is recorded, and no file is written.
	head := auditHead(t, data)
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	code, stdout, stderr = runCLI("audit", "export", "--data-dir", data, "--purpose", "HOPERAT", "--format", "jsonl", "-o", file, "--json")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "--json") {
		t.Errorf("export --format jsonl --json: exit %d, stdout %q, stderr %q; want 2 naming --json", code, stdout, stderr)
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("a refused export wrote %s", file)
	}
	if after := auditHead(t, data); after != head {
		t.Errorf("a refused export was recorded: head %d, was %d", after, head)
	}
}

// devVerifierFile writes the verifier keys of dir's dev signing key
// ('custos audit pubkey --dev') and returns the file.
func devVerifierFile(t *testing.T, dir string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "custos.vkeys")
	if code, stdout, stderr := runCLI("audit", "pubkey", "--data-dir", dir, "--dev", "-o", f); code != 0 {
		t.Fatalf("audit pubkey: exit %d\n%s%s", code, stdout, stderr)
	}
	return f
}

// auditHead is the size of dir's audit log.
func auditHead(t *testing.T, dir string) uint64 {
	t.Helper()
	log := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{})
	defer log.Close()
	head, _ := log.Head()
	return head
}

// rotatedDataDir is an anchored data directory whose dev signing key was
// rotated: old is a verifier file of the key before, and a new key signed
// the latest checkpoint.
func rotatedDataDir(t *testing.T) (data, old string) {
	t.Helper()
	data = anchoredDataDir(t, 3)
	old = devVerifierFile(t, data)
	if err := os.Remove(filepath.Join(data, secrets.DevKeyFile)); err != nil {
		t.Fatal(err)
	}
	appendRecords(t, data, 2)
	anchorDevCheckpoint(t, data)
	return data, old
}

// TestVerifyWithAnOldVerifierFileNamesTheKey: after the checkpoint signing
// key is rotated, a verifier file written before the rotation verifies no
// new checkpoint. audit verify --pubkey still fails (exit 1: nothing
// vouches for the log), but says what is wrong and what to do: the file
// holds no key that signed the checkpoint, and 'custos audit pubkey'
// writes the current one. It said "audit log does not match its anchored
// checkpoints", which reads like a fork or tampering. A log that does not
// match a checkpoint signed by a key in the file still says that.
func TestVerifyWithAnOldVerifierFileNamesTheKey(t *testing.T) {
	data, old := rotatedDataDir(t)

	code, stdout, stderr := runCLI("audit", "verify", "--data-dir", data, "--pubkey", old)
	if code != 1 || !strings.Contains(stdout, "BROKEN anchor: ") {
		t.Fatalf("verify with the old verifier file: exit %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"--pubkey " + old, "no key that signed", "custos audit pubkey"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("verify with the old verifier file: stderr does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "does not match its anchored checkpoints") {
		t.Errorf("verify with the old verifier file reads like a log that does not match its checkpoints:\n%s", stderr)
	}
	current := devVerifierFile(t, data)
	if code, stdout, stderr := runCLI("audit", "verify", "--data-dir", data, "--pubkey", current); code != 0 {
		t.Fatalf("verify with the current verifier file: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// A fork: a checkpoint signed by the current key for another root of
	// the log's size.
	anchorCheckpoint(t, data, checkpoint.Checkpoint{Origin: testOrigin, Size: int64(auditHead(t, data)), Root: tlog.Hash{1}})
	code, stdout, stderr = runCLI("audit", "verify", "--data-dir", data, "--pubkey", current)
	if code != 1 || !strings.Contains(stdout, "fork") || !strings.Contains(stderr, "audit log does not match its anchored checkpoints") {
		t.Errorf("verify of a forked log: exit %d, want 1 saying the log does not match its checkpoints\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestVerifyForkInAnchorNamedLikeAKeyProblem: audit verify told a
// checkpoint signed by no key in --pubkey (a verifier file for another
// key) from a log that does not match its checkpoints by the error's text,
// which names the anchor file: a fork in an --anchor-dir whose name holds
// that text read as "--pubkey holds no key that signed the anchored
// checkpoint", the operator's fault, not tampering. The operation now says
// why in a field (access.AnchorResult.Cause, from checkpoint.ErrUnknownKey),
// and a fork reads as one whatever the anchor is called.
func TestVerifyForkInAnchorNamedLikeAKeyProblem(t *testing.T) {
	data := anchoredDataDir(t, 3)
	keys := devVerifierFile(t, data)
	crafted := checkpoint.ErrBadSignature.Error() + ": " + (&note.UnverifiedNoteError{}).Error() + ": the checkpoint of origin "
	anchor := filepath.Join(t.TempDir(), crafted)
	if err := os.Mkdir(anchor, 0o700); err != nil {
		t.Fatal(err)
	}
	// The fork: the log's key signs another root for the log's size,
	// anchored in the crafted directory.
	kf, err := os.ReadFile(filepath.Join(data, secrets.DevKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(anchor, secrets.DevKeyFile), kf, 0o600); err != nil {
		t.Fatal(err)
	}
	anchorCheckpoint(t, anchor, checkpoint.Checkpoint{Origin: testOrigin, Size: int64(auditHead(t, data)), Root: tlog.Hash{1}})

	code, stdout, stderr := runCLI("audit", "verify", "--data-dir", data, "--anchor-dir", anchor, "--pubkey", keys, "--json")
	var res access.VerifyResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Anchor == nil {
		t.Fatalf("verify --json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if res.Anchor.Cause != access.AnchorMismatch || !strings.Contains(res.Anchor.Error, "fork") {
		t.Errorf("verify --json of a fork: anchor %+v, want cause %q and the fork", res.Anchor, access.AnchorMismatch)
	}
	code, stdout, stderr = runCLI("audit", "verify", "--data-dir", data, "--anchor-dir", anchor, "--pubkey", keys)
	if code != 1 || !strings.Contains(stdout, "fork") || !strings.Contains(stderr, "audit log does not match its anchored checkpoints") || strings.Contains(stderr, "no key that signed") {
		t.Errorf("verify of a fork in an anchor named like a key problem: exit %d, want 1 saying the log does not match its checkpoints\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestVerifyResultWithoutCause: a result from a server older than
// AnchorResult.Cause (over the admin socket) whose error says the
// checkpoint is signed by no key given reads as a log that does not match
// its checkpoints, the alarming reading: the text is not believed, as it
// cannot be told from an anchor file's name. The BROKEN line still shows
// the server's whole error. With the cause, the same text reads as a key
// problem, and the cause alone decides.
func TestVerifyResultWithoutCause(t *testing.T) {
	text := "anchor line 2: " + checkpoint.ErrBadSignature.Error() + ": " + (&note.UnverifiedNoteError{}).Error() +
		": the checkpoint of origin \"o/n/audit\" is signed by \"o/n/audit+0123abcd\", none of them a verifier key given"
	for _, c := range []struct {
		cause, want, not string
	}{
		{"", "does not match its anchored checkpoints", "no key that signed"},
		{access.AnchorMismatch, "does not match its anchored checkpoints", "no key that signed"},
		{access.AnchorUnknownKey, "no key that signed", "does not match"},
	} {
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&out)
		err := printVerify(cmd, access.VerifyResult{Anchor: &access.AnchorResult{Error: text, Cause: c.cause}}, false, "keys.vkeys")
		var ee exitError
		if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("cause %q: %v, want exit 1 saying %q", c.cause, err, c.want)
		}
		if !strings.Contains(out.String(), "BROKEN anchor: "+text) {
			t.Errorf("cause %q: the output does not show the error:\n%s", c.cause, out.String())
		}
	}
}
