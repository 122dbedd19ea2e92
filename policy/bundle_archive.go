package policy

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/custos-mcp/custos/internal/jsonkeys"
)

// checkArchive checks the gzipped tar of a bundle before OPA's bundle reader
// sees it. OPA's tarball loader (v1/bundle/file.go) reads every regular file
// of the archive into memory before any signature is checked, each up to the
// reader's size limit but with no bound on their sum, and it silently skips
// every entry that is not a regular file. So without this check a bundle of a
// few hundred kilobytes of gzip can make the loader allocate gigabytes, and a
// link stored in place of a module drops that module without a word.
//
// It refuses, naming the entry:
//   - an archive whose uncompressed tar stream (headers, contents, padding),
//     or the sum of whose entry sizes, exceeds MaxBundleSize: decompression
//     stops there;
//   - an entry that is neither a regular file nor a directory: symbolic and
//     hard links, devices, FIFOs (a PAX global header, as git archive writes,
//     is allowed);
//   - a file whose name, without one leading "/", is not a clean relative
//     path (fs.ValidPath: no "..", "." or empty element, no trailing "/");
//   - two files with the same name;
//   - a manifest (a file whose name ends in ".manifest", which OPA's reader
//     decodes as the bundle's manifest) that is not one JSON value whose
//     objects each name every key once (see checkManifestJSON).
//
// Everything it accepts, OPA's reader sees exactly as before; the signature,
// the manifest and the modules are checked by that reader and by LoadBundle.
func checkArchive(data []byte) error {
	seen := map[string]bool{}
	return walkArchive(data, func(h *tar.Header, r io.Reader) error {
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			return nil
		case tar.TypeReg:
		default:
			return fmt.Errorf("entry %q is a %s, not a regular file: a policy bundle holds files only", h.Name, entryKind(h.Typeflag))
		}
		name := strings.TrimPrefix(h.Name, "/")
		if !fs.ValidPath(name) || name == "." {
			return fmt.Errorf("entry %q is not a clean relative path (no \"..\", \".\" or empty element)", h.Name)
		}
		if seen[name] {
			return fmt.Errorf("entry %q appears twice", h.Name)
		}
		seen[name] = true
		if strings.HasSuffix(name, bundle.ManifestExt) {
			if err := checkManifestJSON(r); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
		}
		return nil
	})
}

// checkManifestJSON refuses a manifest that means one thing to the
// signature and another to the server. OPA hashes the .manifest for the
// signature as a generic JSON value, where a key given twice counts once
// (the last), but decodes it into its Manifest struct, whose metadata map
// collects the keys of every "metadata" member: with the signed metadata
// last and a forged {"custos": {"sequence": N}} before it, the signature
// held and the bundle claimed N. So no object may name a key twice
// (jsonkeys.Duplicate, which fhirin uses for FHIR input: names equal once
// unescaped, or differing only in case, which the struct decode also takes
// for one another), and nothing may follow the value (the struct decoder
// reads the first value only, the hash reads the whole text). Errors name
// the key, never a value.
func checkManifestJSON(r io.Reader) error {
	raw, err := io.ReadAll(r) // bounded: walkArchive limits the archive
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v json.RawMessage
	if err := dec.Decode(&v); errors.Is(err, io.EOF) {
		return errors.New("manifest is empty")
	} else if err != nil {
		return fmt.Errorf("manifest is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("manifest holds more than one JSON value")
	}
	if off := jsonkeys.Duplicate(raw); off >= 0 {
		var key string
		_ = json.NewDecoder(bytes.NewReader(raw[off:])).Decode(&key)
		return fmt.Errorf("manifest key %.64q appears twice in one object (or with another case): the signature and the server would read different manifests", key)
	}
	return nil
}

// errTooBig is walkArchive's error for an archive over MaxBundleSize
// uncompressed.
var errTooBig = fmt.Errorf("bundle larger than %d bytes uncompressed", MaxBundleSize)

// walkArchive calls fn with every entry of the gzipped tar data and a reader
// of its contents, in order, until fn returns an error. The uncompressed tar
// stream is read up to MaxBundleSize bytes and no further, and the entries'
// sizes may add up to MaxBundleSize at most (errTooBig): a sparse file (PAX
// GNU.sparse records, as GNU tar --sparse writes) has a size, which OPA's
// loader allocates and fills, far beyond the bytes the stream holds for it.
func walkArchive(data []byte, fn func(h *tar.Header, r io.Reader) error) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not a gzipped tar: %w", err)
	}
	lr := &io.LimitedReader{R: zr, N: MaxBundleSize + 1}
	tr := tar.NewReader(lr)
	var total int64
	for {
		h, err := tr.Next()
		if lr.N <= 0 {
			return errTooBig
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tar archive: %w", err)
		}
		if h.Size > MaxBundleSize-total {
			return errTooBig
		}
		total += h.Size
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// signatureHint says, for a bundle whose signature did not verify, what
// about its .signatures.json custos cannot accept, in the words of its
// configuration: an algorithm other than ES256, no key id, or a key id
// that is not configured. OPA's own messages for these ("failed to unpack
// ECDSA signature", "verification key ID is empty") do not say. It returns
// "" when it finds nothing to add; it never quotes the signature.
func signatureHint(data []byte, keys []VerificationKey) string {
	var raw []byte
	errFound := errors.New("found")
	err := walkArchive(data, func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg || !bundle.IsSignaturesFile(h.Name) {
			return nil
		}
		var err error
		raw, err = io.ReadAll(r)
		if err != nil {
			return err
		}
		return errFound
	})
	if !errors.Is(err, errFound) {
		return ""
	}
	var sc bundle.SignaturesConfig
	if json.Unmarshal(raw, &sc) != nil || len(sc.Signatures) != 1 {
		return ""
	}
	hdr, payload, err := decodeJWS(sc.Signatures[0])
	if err != nil {
		return ""
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	kid := cmp.Or(hdr.Kid, payload.KeyID)
	switch {
	case hdr.Alg != "ES256":
		return fmt.Sprintf("the bundle is signed with %.20q; custos verifies ES256 (ECDSA P-256) signatures only", hdr.Alg)
	case kid == "":
		return `the signature names no key (no "kid" header, no "keyid" claim): sign with custos policy bundle/sign --key ID=PEM, or opa sign --claims-file with {"keyid": ID}`
	case !slices.Contains(ids, kid):
		return fmt.Sprintf("the bundle is signed with key %.64q, which is not configured (configured: %s)", kid, strings.Join(ids, ", "))
	}
	return ""
}

// entryKind names a tar entry type for an error message.
func entryKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("tar entry of type %q", t)
}
