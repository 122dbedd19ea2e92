package policy

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/custos-mcp/custos/internal/regularfile"
)

// Bundle format. custos policy bundles are standard OPA bundles (a gzipped
// tar with /.manifest, /data.json, the .rego modules and /.signatures.json),
// so `opa run --bundle --verification-key` and `opa inspect` accept them:
//
//   - the modules are the policy directory's .rego files, tests included
//     (*_test.rego): the tests are shipped and run by [LoadBundle] before the
//     bundle may serve;
//   - data.json is {}: custos policies carry their data in Rego;
//   - .manifest has the revision, rego_version 1 and, when given, the
//     sequence claim metadata.custos.sequence (see CheckSequence), which
//     the signature covers with the rest of the manifest;
//   - .signatures.json holds one compact JWS (ES256, "kid" header) over
//     {"files": [{"name", "hash", "algorithm": "SHA-256"}...], "keyid"},
//     with the file digests computed by OPA's own bundle hashing code.
const (
	// MaxBundleSize bounds a bundle file [LoadBundle] reads, and its tar
	// archive uncompressed (every file, header and padding together; see
	// checkArchive).
	MaxBundleSize = 32 << 20
	// bundleHashAlg is the file digest algorithm signed bundles must use.
	bundleHashAlg = bundle.SHA256
)

// BundleInfo identifies a loaded bundle.
type BundleInfo struct {
	Digest   string // "sha256:" + hex(SHA-256 of the bundle file bytes)
	Revision string // the manifest's revision, as given to BuildBundle
	KeyID    string // id of the key whose signature verified
	Sequence uint64 // the manifest's signed sequence claim (see CheckSequence); 0 if none
}

// BuildBundle reads the .rego files of the policy directory dir (tests
// included), checks that they compile and that their Rego tests pass (a
// policy without tests is refused), and returns an unsigned bundle whose
// manifest revision is revision, or the policy's [Engine.Revision] when
// revision is "". Sign it with [SignBundle] and serialize it with
// [WriteBundle].
func BuildBundle(ctx context.Context, dir, revision string) (*bundle.Bundle, error) {
	files, err := allRegoFiles(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	opts := Options{}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	e, err := vet(ctx, files, opts, true)
	if err != nil {
		return nil, err
	}
	if revision == "" {
		revision = e.Revision()
	}
	return newBundle(files, revision), nil
}

// newBundle packs files into an unsigned snapshot bundle without checking
// them.
func newBundle(files []regoFile, revision string) *bundle.Bundle {
	b := &bundle.Bundle{
		Manifest: bundle.Manifest{Revision: revision},
		Data:     map[string]any{},
	}
	b.Manifest.SetRegoVersion(ast.RegoV1)
	for _, f := range files {
		b.Modules = append(b.Modules, bundle.ModuleFile{
			URL: f.path, Path: f.path, RelativePath: f.path, Raw: f.content,
		})
	}
	return b
}

// captureSignerID names the bundle.Signer plugin SignBundle uses to obtain
// the list of file digests from OPA's own Bundle.GenerateSignature (which
// hashes modules, data, manifest, Wasm and plans exactly as OPA's verifier
// expects) without handing OPA the key: the plugin returns that list as its
// "token", and SignBundle replaces it with the real JWS.
const captureSignerID = "custos-capture-file-digests"

type captureSigner struct{}

func (captureSigner) GenerateSignedToken(files []bundle.FileInfo, _ *bundle.SigningConfig, _ string) (string, error) {
	b, err := json.Marshal(files)
	return string(b), err
}

func init() {
	// Registered once at init, before any concurrent use of OPA's registry.
	if err := bundle.RegisterSigner(captureSignerID, captureSigner{}); err != nil {
		panic(err)
	}
}

// jwsHeader and jwsPayload are what OPA's DefaultSigner writes.
type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

type jwsPayload struct {
	Files []bundle.FileInfo `json:"files"`
	KeyID string            `json:"keyid"` // deprecated by OPA in favour of kid; kept as OPA does
}

// SignBundle signs b in place: it replaces b.Signatures with one compact JWS
// "base64url(header).base64url(payload).base64url(r||s)" (RFC 7515), header
// {"alg":"ES256","kid":signer.KeyID(),"typ":"JWT"}, payload
// {"files":[...],"keyid":...} over the SHA-256 digests of every file of b,
// which is what OPA's DefaultSigner produces and its verifier checks.
//
// The JWS is assembled here rather than by OPA's DefaultSigner because that
// signer needs the private key in memory, and a Vault Transit key never
// leaves Vault; the signature itself comes from signer. When signer has a
// Public() crypto.PublicKey method returning an *ecdsa.PublicKey (as
// [FileSigner] does), the signature is verified before it is used.
//
// Sign b only after its last change: [WriteBundle] writes module bytes as
// they are (no formatting), so the signed digests stay valid.
func SignBundle(ctx context.Context, b *bundle.Bundle, signer JWSSigner) error {
	kid := signer.KeyID()
	if kid == "" {
		return fmt.Errorf("%w: signer has an empty key id", ErrKey)
	}
	tmp := *b
	tmp.Signatures = bundle.SignaturesConfig{}
	sc := bundle.NewSigningConfig("", "ES256", "").WithPlugin(captureSignerID)
	if err := tmp.GenerateSignature(sc, kid, true); err != nil {
		return fmt.Errorf("policy: hashing bundle files: %w", err)
	}
	var files []bundle.FileInfo
	if len(tmp.Signatures.Signatures) != 1 {
		return errors.New("policy: hashing bundle files: no digest list")
	}
	if err := json.Unmarshal([]byte(tmp.Signatures.Signatures[0]), &files); err != nil {
		return fmt.Errorf("policy: hashing bundle files: %w", err)
	}
	hdr, err := json.Marshal(jwsHeader{Alg: "ES256", Kid: kid, Typ: "JWT"})
	if err != nil {
		return err
	}
	payload, err := json.Marshal(jwsPayload{Files: files, KeyID: kid})
	if err != nil {
		return err
	}
	enc := base64.RawURLEncoding
	signingInput := enc.EncodeToString(hdr) + "." + enc.EncodeToString(payload)
	sig, err := signer.SignES256(ctx, []byte(signingInput))
	if err != nil {
		return fmt.Errorf("policy: signing bundle with key %q: %w", kid, err)
	}
	if len(sig) != 64 {
		return fmt.Errorf("policy: signing bundle with key %q: signature is %d bytes, want 64 (r||s)", kid, len(sig))
	}
	if p, ok := signer.(interface{ Public() crypto.PublicKey }); ok {
		if pub, ok := p.Public().(*ecdsa.PublicKey); ok {
			h := sha256.Sum256([]byte(signingInput))
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			if !ecdsa.Verify(pub, h[:], r, s) {
				return fmt.Errorf("policy: signing bundle with key %q: signature does not verify with the signer's public key", kid)
			}
		}
	}
	b.Signatures = bundle.SignaturesConfig{Signatures: []string{signingInput + "." + enc.EncodeToString(sig)}}
	return nil
}

// WriteBundle writes b as a gzipped tar to w, module bytes unformatted, and
// returns the digest of what it wrote ("sha256:" + hex), the digest
// [LoadBundle] will report for that file. The output is deterministic for a
// given b.
func WriteBundle(w io.Writer, b *bundle.Bundle) (digest string, err error) {
	h := sha256.New()
	if err := bundle.NewWriter(io.MultiWriter(w, h)).UseModulePath(true).DisableFormat(true).Write(*b); err != nil {
		return "", fmt.Errorf("policy: writing bundle: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// ReadUnverifiedBundle reads a bundle WITHOUT verifying any signature. It is
// for re-signing an existing bundle (custos policy sign); never load a policy
// from its result: [LoadBundle] is the only way to serve a bundle.
func ReadUnverifiedBundle(r io.Reader) (*bundle.Bundle, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBundleSize+1))
	if err == nil && len(data) > MaxBundleSize {
		err = ErrBundleTooLarge
	}
	if err == nil {
		err = checkArchive(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	b, err := bundle.NewReader(bytes.NewReader(data)).
		WithSkipBundleVerification(true).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxBundleSize).
		Read()
	if err != nil {
		trimBundleLocations(err)
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	return &b, nil
}

// trimBundleLocations makes the file of every location in err's ast.Errors
// (OPA's bundle reader parses modules by their archive path,
// "/custos/authz.rego") bundle-relative, "custos/authz.rego": the name the
// compiler's errors (a type error), the Rego tests and a policy directory
// give the same file, so that a parse error in a server's log, a
// policy/reject record or custos policy verify names it alike. The errors
// are those of a read that failed: nothing else holds them.
func trimBundleLocations(err error) {
	errs, ok := errors.AsType[ast.Errors](err)
	if !ok {
		return
	}
	for _, e := range errs {
		if e != nil && e.Location != nil {
			e.Location.File = strings.TrimPrefix(e.Location.File, "/")
		}
	}
}

// LoadBundle loads the signed policy bundle at path. Verification is
// mandatory: the bundle must carry a .signatures.json whose ES256 JWS
// verifies with one of keys (selected by the "kid" header) and whose SHA-256
// digests cover exactly the bundle's files. Then its policy modules are
// compiled as [Load] does and its Rego tests (which a bundle must ship) must
// all pass. Only then is an Engine returned; its [Engine.BundleDigest] is the
// digest of the file.
//
// Errors are a [*CandidateError] carrying the bundle digest (when the file
// could be read) and wrapping ErrKey, ErrBundle, ErrSignature, ErrCompile or
// ErrTestsFailed.
func LoadBundle(ctx context.Context, path string, keys []VerificationKey, opts Options) (*Engine, BundleInfo, error) {
	return loadBundle(ctx, path, keys, opts, nil)
}

// sequenceGate decides whether a bundle whose signature verified, with
// claim seq (0: none) and file digest digest, may go on to be compiled and
// tested; an error refuses it (a [*RollbackError] from the Reloader).
type sequenceGate func(seq uint64, digest string) error

// loadBundle is LoadBundle, refusing with gate's error (when gate is not
// nil) a bundle that gate refuses, once its signature has verified and
// before its policy is compiled and its tests run: the claim is signed, so
// it can be trusted then, and a rollback costs no compile and no test run
// (seconds on every core, at every change of the file).
func loadBundle(ctx context.Context, path string, keys []VerificationKey, opts Options, gate sequenceGate) (*Engine, BundleInfo, error) {
	if err := opts.validate(); err != nil {
		return nil, BundleInfo{}, err
	}
	if err := checkKeys(keys); err != nil {
		return nil, BundleInfo{}, &CandidateError{Err: err}
	}
	data, err := readBundleFile(path)
	if err != nil {
		return nil, BundleInfo{}, &CandidateError{Err: fmt.Errorf("%w: %w", ErrBundle, err)}
	}
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	var check func(seq uint64) error
	if gate != nil {
		check = func(seq uint64) error { return gate(seq, digest) }
	}
	e, info, err := loadBundleBytes(ctx, data, keys, opts, check)
	if ce, ok := errors.AsType[*CandidateError](err); ok {
		ce.Digest = digest
		return nil, BundleInfo{}, ce
	}
	if err != nil {
		return nil, BundleInfo{}, &CandidateError{Digest: digest, Err: err}
	}
	info.Digest = digest
	e.bundleDigest = digest
	e.bundleKeyID = info.KeyID
	e.candidateDigest = digest
	e.log.Info("policy bundle loaded", "revision", e.revision, "bundle_digest", digest,
		"bundle_revision", info.Revision, "bundle_sequence", info.Sequence, "key_id", info.KeyID)
	return e, info, nil
}

// readBundleFile reads at most MaxBundleSize bytes of path, which must be
// a regular file (through symbolic links): opening a FIFO would block the
// load, and with it every reload, until something writes to it.
func readBundleFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &regularfile.NotRegularError{Path: path, Kind: regularfile.Kind(fi.Mode())}
	}
	if fi.Size() > MaxBundleSize {
		// Refused without reading it: the policy watcher fingerprints the
		// file at every poll, and read 32 MiB each time to refuse it (a
		// file that grows after this Stat is cut by the limit below).
		return nil, ErrBundleTooLarge
	}
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBundleSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBundleSize {
		return nil, ErrBundleTooLarge
	}
	return data, nil
}

// openRegular opens path for reading if it is a regular file, as checked
// on the file opened: the path may be renamed over between a check of the
// name and the open (a rollout renames the new bundle over it), and the
// open itself does not wait for a writer if a FIFO took its place.
func openRegular(path string) (*os.File, error) {
	return regularfile.Open(path, os.O_RDONLY, 0, regularfile.FollowLinks)
}

func loadBundleBytes(ctx context.Context, data []byte, keys []VerificationKey, opts Options, check func(seq uint64) error) (*Engine, BundleInfo, error) {
	// Before OPA's reader, which would decompress every file into memory
	// first and skip links silently.
	if err := checkArchive(data); err != nil {
		return nil, BundleInfo{}, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	read := func(vc *bundle.VerificationConfig) (bundle.Bundle, error) {
		r := bundle.NewReader(bytes.NewReader(data)).
			WithRegoVersion(ast.RegoV1).
			WithSizeLimitBytes(MaxBundleSize)
		if vc == nil {
			r = r.WithSkipBundleVerification(true)
		} else {
			r = r.WithBundleVerificationConfig(vc)
		}
		return r.Read()
	}
	pub := make(map[string]*bundle.KeyConfig, len(keys))
	for _, k := range keys {
		pub[k.ID] = &bundle.KeyConfig{Key: string(k.PEM), Algorithm: "ES256"}
	}
	// KeyID "" selects the key by the JWS "kid" header; Scope "" requires the
	// payload to have no scope, as SignBundle writes it. The config requires
	// a signature (no WithOptionalSignature). The algorithm comes from the
	// key configuration, never from the JWS header.
	b, err := read(bundle.NewVerificationConfig(pub, "", "", nil))
	if err != nil {
		// Say what is wrong. OPA's reader checks the JWS and each file's
		// digest before it parses the modules, so a parse error means the
		// signature held and the policy is broken. Otherwise, if the bundle
		// reads without verification, verification is what failed.
		if _, ok := errors.AsType[ast.Errors](err); ok {
			trimBundleLocations(err)
			return nil, BundleInfo{}, fmt.Errorf("%w: %w", ErrCompile, err)
		}
		if _, uerr := read(nil); uerr != nil {
			if _, ok := errors.AsType[ast.Errors](uerr); !ok {
				return nil, BundleInfo{}, fmt.Errorf("%w: %w", ErrBundle, uerr)
			}
		}
		if hint := signatureHint(data, keys); hint != "" {
			return nil, BundleInfo{}, fmt.Errorf("%w: %s (%w)", ErrSignature, hint, err)
		}
		return nil, BundleInfo{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if len(b.Signatures.Signatures) != 1 {
		// Unreachable with a required signature; kept as a guard.
		return nil, BundleInfo{}, fmt.Errorf("%w: bundle is not signed", ErrSignature)
	}
	kid, err := checkSignedDigests(b.Signatures.Signatures[0])
	if err != nil {
		return nil, BundleInfo{}, err
	}
	e, err := bundleEngine(ctx, &b, opts, check)
	if err != nil {
		// The signature verified: the candidate's identity can be
		// believed, and its refusal names it (a *CandidateError without
		// its digest, which the caller adds).
		ce := &CandidateError{KeyID: kid, Err: err}
		ce.Sequence, _ = BundleSequence(&b)
		if files, ferr := bundleFiles(&b); ferr == nil {
			policies, _ := splitTests(files)
			ce.Revision = revision(policies)
		}
		return nil, BundleInfo{}, ce
	}
	return e, BundleInfo{Revision: b.Manifest.Revision, KeyID: kid, Sequence: e.bundleSequence}, nil
}

// CheckBundle runs on b every check [LoadBundle] runs on a bundle's
// contents, the signature apart: a snapshot bundle without data documents,
// Wasm or plan modules, clean module paths, a policy that compiles and
// whose Rego tests (which it must ship) pass, a well-formed sequence claim
// (if any; see CheckSequence). custos policy sign runs it on
// the bundle it re-signs, whatever the signer. Errors wrap ErrBundle,
// ErrCompile or ErrTestsFailed.
func CheckBundle(ctx context.Context, b *bundle.Bundle) error {
	_, err := bundleEngine(ctx, b, Options{}, nil)
	return err
}

// bundleEngine checks the contents of b (see CheckBundle) and returns the
// engine of its policy. check, when not nil, is given b's sequence claim
// before anything is compiled: its error refuses b.
func bundleEngine(ctx context.Context, b *bundle.Bundle, opts Options, check func(seq uint64) error) (*Engine, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	switch {
	case b.Type() != bundle.SnapshotBundleType:
		return nil, fmt.Errorf("%w: %s bundles are not accepted", ErrBundle, b.Type())
	case len(b.Data) > 0:
		return nil, fmt.Errorf("%w: bundle carries data documents; custos policies keep their data in Rego", ErrBundle)
	case len(b.Wasm) > 0 || len(b.WasmModules) > 0 || len(b.PlanModules) > 0:
		return nil, fmt.Errorf("%w: bundle carries Wasm or plan modules; custos evaluates Rego only", ErrBundle)
	}
	seq, err := BundleSequence(b)
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(seq); err != nil {
			return nil, err
		}
	}
	files, err := bundleFiles(b)
	if err != nil {
		return nil, err
	}
	e, err := vet(ctx, files, opts, true)
	if err != nil {
		return nil, err
	}
	e.bundleSequence = seq
	return e, nil
}

// bundleFiles returns the .rego files of b, in the order of a directory
// load, so that the revision matches. A module path that is not clean is
// an error (ErrBundle).
func bundleFiles(b *bundle.Bundle) ([]regoFile, error) {
	files := make([]regoFile, 0, len(b.Modules))
	for _, m := range b.Modules {
		p := strings.TrimPrefix(m.Path, "/")
		if !fs.ValidPath(p) {
			return nil, fmt.Errorf("%w: bad module path %q", ErrBundle, m.Path)
		}
		files = append(files, regoFile{path: p, content: m.Raw})
	}
	return sortFiles(files), nil
}

// checkSignedDigests decodes the (already verified) JWS token and returns the
// key id that verified it; it refuses file digests other than SHA-256, which
// OPA's verifier would accept (MD5, SHA-1) if a signer had used them.
func checkSignedDigests(token string) (string, error) {
	hdr, payload, err := decodeJWS(token)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSignature, err)
	}
	for _, f := range payload.Files {
		if f.Algorithm != string(bundleHashAlg) {
			return "", fmt.Errorf("%w: file %s is signed with digest %s, want %s", ErrSignature, f.Name, f.Algorithm, bundleHashAlg)
		}
	}
	// OPA picks the key by the kid header, else by the deprecated keyid claim.
	if hdr.Kid != "" {
		return hdr.Kid, nil
	}
	return payload.KeyID, nil
}

// decodeJWS decodes the header and payload of a compact JWS without
// verifying it. Errors name the part that is malformed, never its bytes.
func decodeJWS(token string) (jwsHeader, jwsPayload, error) {
	var hdr jwsHeader
	var payload jwsPayload
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return hdr, payload, errors.New("malformed JWS")
	}
	enc := base64.RawURLEncoding
	hb, err := enc.DecodeString(parts[0])
	if err == nil {
		err = json.Unmarshal(hb, &hdr)
	}
	if err != nil {
		return hdr, payload, errors.New("malformed JWS header")
	}
	pb, err := enc.DecodeString(parts[1])
	if err == nil {
		err = json.Unmarshal(pb, &payload)
	}
	if err != nil {
		return hdr, payload, errors.New("malformed JWS payload")
	}
	return hdr, payload, nil
}
