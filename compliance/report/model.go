package report

import (
	"time"

	"github.com/custos-mcp/custos/audit/bundle"
)

// Format is the "format" value of report.json.
const Format = "custos-compliance-report/v1"

// Report is the auditor's report: everything report.json holds and
// report.html shows. Every figure drawn from the period names its records
// by seq (Figure, Seqs) in the bundle the package includes; Rules says how
// each is recounted from the bundle's records.jsonl.
type Report struct {
	Format    string    `json:"format"`
	Generated time.Time `json:"generated"`
	Tool      string    `json:"tool"` // "custos <version>"

	Period Period    `json:"period"`
	Bundle BundleRef `json:"bundle"`

	Summary  Summary   `json:"summary"`
	Days     []Day     `json:"days"`     // days with records, in order
	Patients []Subject `json:"patients"` // by tenant and lookup value (keyed hash), most accesses first
	Users    []Subject `json:"users"`    // by principal subject, most accesses first
	Denials  []Event   `json:"denials"`
	Refusals []Event   `json:"refusals"`

	BreakGlass       BreakGlass `json:"break_glass"`
	Policies         []Policy   `json:"policies"`
	PolicyRejections []Event    `json:"policy_rejections"`
	Keys             []KeyUse   `json:"keys"`

	Verification Verification `json:"verification"`
	Retention    Retention    `json:"retention"`
	Controls     Controls     `json:"controls"`

	// Rules maps each figure's JSON path to how it is recounted from the
	// bundle's records.jsonl.
	Rules map[string]string `json:"rules"`
}

// Period is the time range asked for and the records it resolved to.
type Period struct {
	Since time.Time `json:"since,omitzero"` // zero: from the first record
	Until time.Time `json:"until,omitzero"` // zero: to the last record covered by a checkpoint
	First EventRef  `json:"first"`          // first record of the period
	Last  EventRef  `json:"last"`           // last record of the period
}

// BundleRef names the export bundle the figures come from.
type BundleRef struct {
	Dir      string          `json:"dir"` // relative to the package: "bundle"
	Manifest bundle.Manifest `json:"manifest"`
	// NotCovered is set when records of the period came after the latest
	// signed checkpoint: they are not in the bundle, nor in any figure.
	NotCovered *SeqRange `json:"not_covered,omitempty"`
}

// SeqRange is an inclusive range of seqs.
type SeqRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// EventRef names one record by seq and time.
type EventRef struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// Summary holds the period's totals.
type Summary struct {
	Records            Figure `json:"records"`
	Accesses           Figure `json:"accesses"`
	Allowed            Figure `json:"allowed"`
	Denials            Figure `json:"denials"`
	Errors             Figure `json:"errors"`
	Refusals           Figure `json:"refusals"`
	BreakGlassAccesses Figure `json:"break_glass_accesses"`
	GrantEvents        Figure `json:"grant_events"`
	PolicyEvents       Figure `json:"policy_events"`
	Patients           int    `json:"patients"` // distinct (tenant, lookup value) pairs in accesses; a pair of no tenant only when no tenant names its lookup value
	Users              int    `json:"users"`    // distinct principal subjects in accesses
	// PatientKeys are the audit keyed-hash key versions ("audit-hmac=<id>")
	// the accesses naming patients were recorded under. With more than one,
	// a patient accessed under several has one lookup value per version:
	// Patients counts lookup values, not people.
	PatientKeys []string `json:"patient_keys"`
	// RefusedRequests are the requests the Refusals records stand for: one
	// for each, but N for an aggregate refusal record (its reason's
	// count=N; docs/audit-format.md, "Aggregate refusal records").
	RefusedRequests int64 `json:"refused_requests"`
}

// Day is one UTC day of the period. Its records are the contiguous range
// Seqs (record times never decrease).
type Day struct {
	Date       string         `json:"date"` // YYYY-MM-DD, UTC
	Seqs       Seqs           `json:"seqs"`
	Records    int            `json:"records"`
	Accesses   int            `json:"accesses"`
	Outcomes   map[string]int `json:"accesses_by_outcome"`
	Purposes   map[string]int `json:"accesses_by_purpose"`
	Denials    int            `json:"denials"`
	Refusals   int            `json:"refusals"`
	BreakGlass int            `json:"break_glass_accesses"`
	Grants     int            `json:"grant_events"`
	// RefusedRequests: the requests the day's refusal records stand for
	// (Summary.RefusedRequests' rule).
	RefusedRequests int64 `json:"refused_requests"`
}

// Subject is one patient (by lookup value) or one user (by principal
// subject) and the accesses that concern them.
type Subject struct {
	ID string `json:"id"`
	// Tenant is a patient's tenant, from the URIs of the accesses (""
	// when they name the patient in no URI). A lookup value is the same
	// in every tenant (audit.PatientRef): a patient is the pair, and one
	// id in two tenants is two Subjects.
	Tenant     string `json:"tenant,omitempty"`
	Accesses   Figure `json:"accesses"`
	Allowed    int    `json:"allowed"`
	Denied     int    `json:"denied"`
	Errors     int    `json:"errors"`
	BreakGlass int    `json:"break_glass"`
	Users      int    `json:"users,omitempty"` // a patient's distinct users
	// Keys: a patient's audit keyed-hash key versions ("audit-hmac=<id>"),
	// the ones its lookup value was computed under.
	Keys     []string  `json:"keys,omitempty"`
	Patients int       `json:"patients,omitempty"` // a user's distinct patients
	Purposes []string  `json:"purposes"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
}

// Event is one record in the reader's terms (denials, refusals, policy
// rejections). It never holds a URI or a raw patient id.
type Event struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Action   string    `json:"action"`
	Outcome  string    `json:"outcome"`
	Reason   string    `json:"reason"`
	User     string    `json:"user"`
	Client   string    `json:"client"`
	Purpose  string    `json:"purpose_of_use"`
	Patients int       `json:"patients"` // how many patients the record concerns
	// Count is, for an aggregate refusal record, the refusals it stands
	// for (its reason's count=N); absent for any other record.
	Count int64 `json:"count,omitempty"`
}

// BreakGlass is the period's break-the-glass trail, from the audit records
// (btg/* events and accesses naming a grant), cross-checked against
// grants.db when the package found one.
type BreakGlass struct {
	// Accesses are access records with purpose ETREAT or a break-glass
	// reason (audit/report.IsBreakGlass).
	Accesses Figure `json:"accesses"`
	// WithoutGrant are those of Accesses that name no grant (typically
	// emergency requests refused because no grant covered them).
	WithoutGrant Figure `json:"without_grant"`
	// OtherTenant are the accesses that name a grant while their URIs are
	// all of tenants other than the grant's (Grant.OtherTenant): no use of
	// that grant, and something the server never does for a grant that
	// names its tenant (an edited grants.db, or a grant without a tenant
	// under an older custos, whose records name no tenant to compare).
	OtherTenant Figure  `json:"other_tenant"`
	Grants      []Grant `json:"grants"`
	Unreviewed  int     `json:"unreviewed"` // grants with a use after their last review
	// GrantsFile is the cross-check against grants.db (nil: none found).
	GrantsFile *GrantsFile `json:"grants_file,omitempty"`
}

// Grant is one break-the-glass grant as the audit records show it.
type Grant struct {
	ID      string `json:"id"`
	Grantee string `json:"grantee"`
	// Tenant is the tenant of the grant's patient, as its btg/* records
	// name it (tenant=); "" when none of the period's does (a grant made
	// before grants named a tenant). Patient lookup values are not per
	// tenant: one id in two tenants has one lookup value, two people.
	Tenant    string    `json:"tenant,omitempty"`
	Patient   string    `json:"patient"` // lookup value (keyed hash)
	GrantedBy string    `json:"granted_by"`
	Granted   *EventRef `json:"granted"` // nil: granted before the period
	Expires   string    `json:"expires,omitempty"`
	TTL       string    `json:"ttl,omitempty"`
	Revoked   *EventRef `json:"revoked,omitempty"`
	RevokedBy string    `json:"revoked_by,omitempty"` // the OS account (the record's principal)
	// RevokedByClaimed is whom that account named (claimed_by=): a claim.
	RevokedByClaimed string    `json:"revoked_by_claimed,omitempty"`
	Expired          *EventRef `json:"expired,omitempty"`
	// Refused: the server refused the grant (it broke the rules in force:
	// btg/refuse, code ttl_over_cap, role_not_allowed, no_tenant or
	// bad_tenant); it never took effect.
	Refused     *EventRef `json:"refused,omitempty"`
	RefusedCode string    `json:"refused_code,omitempty"`
	// Uses are the accesses naming the grant, of its tenant (an access
	// with no URI, a completion of another argument than id, names no
	// tenant and counts; so does every access when the grant's tenant is
	// unknown).
	Uses    []Use `json:"uses"`
	UseSeqs Seqs  `json:"use_seqs"`
	// OtherTenant are the accesses naming the grant whose URIs are all of
	// other tenants: not uses of it (BreakGlass.OtherTenant).
	OtherTenant []Use    `json:"other_tenant,omitempty"`
	Reviews     []Review `json:"reviews"`
	// Reviewed: every use is covered by a later review (true with no use);
	// for a grant made in the period, a review's uses=<n> must also count
	// every use (the review record is written after the sign-off, and a
	// use in between is not one the reviewer saw).
	Reviewed bool `json:"reviewed"`
}

// Use is one access made under a grant.
type Use struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Outcome string    `json:"outcome"`
	// Tenants are the tenants of the access's URIs (none: it names no URI).
	Tenants []string `json:"tenants,omitempty"`
}

// Review is a privacy officer's sign-off on a grant.
type Review struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Reviewer string    `json:"reviewer"` // the OS account (the record's principal)
	// Claimed is whom that account named (claimed_by=): a claim.
	Claimed string `json:"claimed_by,omitempty"`
	Verdict string `json:"verdict"`
	Uses    string `json:"uses"` // uses the reviewer saw, as the record states
}

// GrantsFile compares grants.db with the audit records. grants.db is a
// mutable working file, not covered by any signature: this is a
// cross-check, never evidence.
type GrantsFile struct {
	Grants     []GrantFileRow `json:"grants"`
	Mismatches int            `json:"mismatches"`
}

// GrantFileEntry is what the report needs of one grant of grants.db (no
// patient id: the file holds raw ids, the report only lookup values).
type GrantFileEntry struct {
	ID      string
	Grantee string
	Tenant  string
	Created time.Time
	Expires time.Time
	Revoked time.Time
	Uses    int
	Reviews int
}

// GrantFileRow is one grant of grants.db next to the records.
type GrantFileRow struct {
	ID      string `json:"id"`
	Grantee string `json:"grantee"`
	// Tenant is grants.db's; RecordTenant the records' (Grant.Tenant).
	// TenantMismatch: both are known and differ (grants.db was edited):
	// a Mismatch whatever the period.
	Tenant         string    `json:"tenant,omitempty"`
	RecordTenant   string    `json:"record_tenant,omitempty"`
	TenantMismatch bool      `json:"tenant_mismatch,omitempty"`
	Created        time.Time `json:"created"`
	Expires        time.Time `json:"expires"`
	FileUses       int       `json:"file_uses"`
	RecordUses     int       `json:"record_uses"`
	FileReviews    int       `json:"file_reviews"`
	RecReviews     int       `json:"record_reviews"`
	// Comparable: the grant's whole life lies in the period, so the
	// counts must agree; Mismatch: they do not.
	Comparable bool `json:"comparable"`
	Mismatch   bool `json:"mismatch"`
}

// Policy is one policy revision in force during the period.
type Policy struct {
	Revision  string     `json:"revision"`
	Bundle    string     `json:"bundle_digest,omitempty"`
	Decisions Figure     `json:"decisions"` // period records decided under it
	First     time.Time  `json:"first,omitzero"`
	Last      time.Time  `json:"last,omitzero"`
	Loads     []EventRef `json:"loads"` // policy/load records of it in the period
	// LoadedBefore is the last policy/load of this revision before the
	// period (outside the bundle; prove it with 'custos audit prove').
	LoadedBefore *EventRef `json:"loaded_before,omitempty"`
}

// KeyUse is one secret key version named by records' keys field.
type KeyUse struct {
	Key     string    `json:"key"` // "name=ref", never key material
	Records Figure    `json:"records"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
}

// Verification is the transcript of every check the command ran.
type Verification struct {
	Log     LogCheck           `json:"log"`
	Anchors AnchorCheck        `json:"anchors"`
	Bundle  *bundle.Transcript `json:"bundle"`
	OK      bool               `json:"ok"` // all three passed
}

// LogCheck is the whole live log's verification (audit.Log.Verify): every
// record's hash and canonical form, the chain, seq continuity, time order,
// the Merkle tree and the head.
type LogCheck struct {
	Records  int64    `json:"records"`
	HeadSeq  uint64   `json:"head_seq"`
	HeadHash string   `json:"head_hash"`
	Problems []string `json:"problems"`
	OK       bool     `json:"ok"`
}

// AnchorCheck is the check of the log against its anchored checkpoints.
type AnchorCheck struct {
	// Checkpoints counts the distinct signed checkpoints of all the files
	// (one that the data directory and an anchor both hold counts once):
	// those whose signed note verifies with the verifier keys and names
	// its line's size and root. Failed counts the lines whose note does
	// not (forged, altered, or signed by an unknown key); Files has each
	// file's own counts. LatestSize and LatestRoot are the latest signed
	// checkpoint's.
	Checkpoints int    `json:"checkpoints"`
	Failed      int    `json:"failed"`
	LatestSize  int64  `json:"latest_size"`
	LatestRoot  string `json:"latest_root"`
	Sources     string `json:"sources"` // the anchor files read
	// Files are the anchor files read, the data directory's first, each
	// with what it held: an auditor checks each anchor apart.
	Files []AnchorFile `json:"files"`
	Error string       `json:"error,omitempty"`
	// Cause says why the check failed, named as 'custos audit verify'
	// names it (access.AnchorResult.Cause), whenever Error is set:
	// "unknown_key", the latest anchored checkpoint carries no signature
	// by a verifier key given (keys of another signing key version or
	// origin: nothing vouches for the log, but the log may be intact), or
	// "mismatch", any other failure (the log does not match a checkpoint:
	// a fork, a rollback; a signature that does not verify).
	Cause string `json:"cause,omitempty"`
	OK    bool   `json:"ok"`
}

// AnchorFile is one anchor file (checkpoints.jsonl) the log was checked
// against: its signed checkpoints of size at most the view's end (those
// whose signature verified), the latest of them (size 0 and no root when
// it held none), and where each checkpoint whose signature did not verify
// is ("line 3 (size 40)").
type AnchorFile struct {
	Path        string   `json:"path"`
	Checkpoints int      `json:"checkpoints"`
	LatestSize  int64    `json:"latest_size"`
	LatestRoot  string   `json:"latest_root,omitempty"`
	Failed      []string `json:"failed"`
}

// Retention is the retention status of the whole log (not only the
// period).
type Retention struct {
	Period        string    `json:"period"` // Go duration
	PeriodText    string    `json:"period_text"`
	Records       uint64    `json:"records"` // head seq
	Oldest        *EventRef `json:"oldest"`
	Newest        *EventRef `json:"newest"`
	OldestAgeDays float64   `json:"oldest_age_days"`
	// PastRetention are the records older than the period at generation
	// time. custos keeps them; purging is an operator's procedure.
	PastRetention  Figure         `json:"past_retention"`
	Months         []Month        `json:"months"`
	NothingDeleted NothingDeleted `json:"nothing_deleted"`
	DeletesRecords bool           `json:"deletes_records"` // always false
}

// Month is one calendar month (UTC) of the whole log.
type Month struct {
	Month   string `json:"month"` // YYYY-MM
	Seqs    Seqs   `json:"seqs"`
	Records int    `json:"records"`
}

// NothingDeleted is the proof that no record was deleted: seqs run from 1
// with no gap to the head, the Merkle tree's size equals the head, and the
// log is consistent with every anchored (signed) checkpoint, so no prefix
// a checkpoint committed to was cut or rewritten.
type NothingDeleted struct {
	GaplessFromOne     bool   `json:"gapless_from_one"`
	FirstSeq           uint64 `json:"first_seq"`
	LastSeq            uint64 `json:"last_seq"`
	TreeSize           int64  `json:"tree_size"`
	TreeSizeEqualsHead bool   `json:"tree_size_equals_head"`
	AnchorsConsistent  bool   `json:"anchors_consistent"`
	OK                 bool   `json:"ok"`
}

// Controls is the status of each compliance/ control.
type Controls struct {
	Definition string `json:"definition"` // title and version of the component definition
	// Checked: a `go test -json` results file was given and judged
	// (compliance.CheckEvidence); otherwise every control is "not checked
	// in this package".
	Checked    bool      `json:"checked"`
	Results    string    `json:"results,omitempty"` // the results file's name
	Passed     int       `json:"passed"`
	Failed     int       `json:"failed"`
	NotChecked int       `json:"not_checked"`
	Items      []Control `json:"controls"`
}

// Control statuses.
const (
	StatusPassed     = "evidence passed"
	StatusFailed     = "evidence failed"
	StatusNotChecked = "not checked in this package"
)

// Control is one implemented requirement and its evidence.
type Control struct {
	ID             string         `json:"id"`
	Catalog        string         `json:"catalog"` // "HIPAA Security Rule", "HIPAA Privacy Rule", "NIST SP 800-53 rev5"
	Source         string         `json:"source"`  // the control implementation's source
	Title          string         `json:"title"`
	Implementation string         `json:"implementation"`
	Status         string         `json:"status"`
	Evidence       []EvidenceTest `json:"evidence"`
}

// EvidenceTest is one evidence test and its result in the results file
// ("pass", "fail", "skip", "did not run", or StatusNotChecked).
type EvidenceTest struct {
	Test   string `json:"test"`
	Result string `json:"result"`
}
