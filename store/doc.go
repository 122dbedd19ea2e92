// Package store is custos's resource catalog and content-addressed blob
// store, kept in one bbolt file, together with the custos URI scheme and its
// RFC 6570 templates and the manifest import that fills the store.
//
// # Responsibility
//
// store answers "which resources exist, with which labels" (Get, Page, Count)
// and "what are the bytes of this digest" (Blob). It makes no access
// decision: callers (the server) must obtain a policy decision and commit an
// audit record before they call Blob and release content. Metadata and labels
// are returned to the caller so that it can decide; content is only returned
// by Blob.
//
// # URIs
//
// A resource is named by a URI of one of four families (see ParseURI and
// docs/uris.md):
//
//	fhir://{tenant}/patients/{patient}/{type}/{id}
//	note://{tenant}/patients/{patient}/notes/{id}
//	report://{tenant}/patients/{patient}/reports/{id}
//	image://{tenant}/patients/{patient}/images/{id}
//
// Patient and id are opaque lowercase UUIDs, never names or record numbers.
// ParseURI accepts only canonical input, so a resource has exactly one URI
// string and byte-wise comparison of URIs is identity.
//
// # Storage layout (schema version 1)
//
//	bucket "resources": uri -> JSON(Resource), the current version
//	bucket "versions":  uri || 0x00 || uint32be(version) -> JSON(Resource)
//	                    every version ever imported, the current one included
//	bucket "blobs":     SHA-256(content) (32 bytes) -> content
//	bucket "meta":      "schema" -> uint32be(SchemaVersion)
//
// # Invariants
//
//   - Content addressing: every blob is stored under the SHA-256 of its bytes;
//     identical content is stored once. Resource.ETag is "sha256:" + hex of
//     that key and Resource.Size is the blob's length. Blob re-hashes the
//     bytes on every read and returns an *IntegrityError instead of content
//     that does not match (45 CFR 164.312(c), integrity).
//   - Nothing is deleted: blobs and versions are never removed or rewritten;
//     an import only adds blobs, adds versions and moves "resources" forward
//     (164.316(b)(2), retention). Versions of one URI are 1, 2, 3, ... and
//     resources[uri] equals versions[uri, max].
//   - Labels.Tenant, Labels.Patient and Labels.Type equal the corresponding
//     URI segments, so policy can trust either.
//   - All or nothing: Import validates every manifest line and every file
//     before it writes, then writes in one bbolt transaction.
//   - No PHI or secrets in errors or logs: errors name manifest lines and
//     fields, URI errors say what is wrong without echoing input, and file
//     content is never quoted.
//
// # Caveats
//
// bbolt allows one process to hold the file read-write; a second Open waits
// Options.Timeout and returns ErrLocked. The server can open the store
// ReadOnly (shared lock), but an import then has to wait until it closes.
// A large import is one transaction, so the imported content is held in
// memory until commit (a few hundred MB for 100,000 small files). Blobs are
// not encrypted by this package.
package store
