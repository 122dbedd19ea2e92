# custos default authorization policy.
#
# Queries: data.custos.authz.decision (one request),
# data.custos.authz.decisions (a list page: one decision per input.items entry)
# and data.custos.authz.nothing_visible (no resource can be allowed to the
# principal for the purpose: a list answers one empty page without scanning).
# Input: see docs/policy.md ("Input", "Batch decisions"). Output:
#   {"allow": bool, "reasons": [string], "obligations": [{"op", "path", "fn"?}]}
#
# Invariants:
#   - Deny by default: anything not granted below is denied.
#   - "list" and "read" are decided by the same function (resource_decisions),
#     which never looks at input.action, and a list page is decided by the
#     very function a single read goes through, so a list never shows what a
#     read would deny.
#   - Every deny carries at least one short snake_case reason code.
#
# Performance: a decision depends on the resource only through a few
# features (type, tenant, labels, consent flags, whether the patient is in the
# care team, the break-the-glass grant); everything that depends on the
# principal and the purpose is a complete rule, evaluated once per query, and
# class_decision, the decision for one combination of features, is a function,
# which OPA memoizes per argument tuple within one query. A list page of 100
# resources therefore evaluates the full rule set only once per distinct
# feature combination.
package custos.authz

# HL7 v3 ActReason purpose-of-use codes the server understands.
known_purposes := {
	"TREAT", "ETREAT", "HPAYMT", "HOPERAT", "HRESCH",
	"HMARKT", "COVERAGE", "PUBHLTH", "PATRQT",
}

# Resource types served by the store (lowercase): every concrete FHIR R4
# resource type (fhir_r4_types, at the end of this file; FHIR R4 JSON) and the
# document families note (text/markdown), report (application/pdf), image
# (image/png) and attachment (a document or image lifted out of the FHIR
# resource that carried it, or a Binary; MIME type per resource). An
# attachment is treated like the note and report families it resembles:
# clinicians with a care relationship (or a break-the-glass grant) read it;
# billing and research do not. Any other type is denied (fail closed).
document_types := {"note", "report", "image", "attachment"}

known_type(typ) if typ in fhir_r4_types

known_type(typ) if typ in document_types

# Tenant-level reference data: resources outside every Patient compartment
# (labels.patient is ""), which name no patient. Clinicians (treatment and
# emergency treatment) and billing of the tenant read them; research reads
# them de-identified. A tenant-level resource of another type (a Group,
# whose members are patients; an attachment without a patient; a clinical
# type that names no patient) is denied to everyone: fail closed. So is
# one labelled residence, a Location that is a patient's home
# (sensitivity_roles).
reference_types := {
	"organization", "practitioner", "practitionerrole", "location",
	"healthcareservice", "endpoint", "medication", "substance",
	"device", "devicedefinition", "medicationknowledge",
}

# Sensitivity labels and the extra role each one needs. A label mapped to ""
# needs no extra role. Labels not listed here are denied (fail closed).
#   hiv: HIV/AIDS information;
#   sud: substance use disorder records under 42 CFR Part 2; eth (HL7
#        ActCode ETH, substance abuse information) needs the same role;
#   psy: psychiatry; sdv: sexual assault, abuse or domestic violence;
#   std: sexually transmitted disease; sex: sexuality and reproductive health;
#   restricted (v3 Confidentiality R): treatment only (care team or
#        break-the-glass), never billing or research (restricted_use_only_treatment);
#   very-restricted (v3 Confidentiality V): treatment only, and the
#        sensitive:very-restricted role;
#   vip: no extra role; allowed decisions carry "vip_patient" for review;
#   residence: a Location that is a patient's home (v3-RoleCode PTRES,
#        physicalType ho, a home address: docs/import.md, "A patient's
#        home"). No extra role; a tenant-level resource carrying it is
#        not reference data (reference_grant): it concerns a patient the
#        decision cannot check a care relationship, an opt-out or a VIP
#        label against, so it is denied to every role with
#        patient_residence_not_reference_data. In a patient's compartment
#        it changes nothing: the role grants decide, as for any of the
#        patient's resources.
sensitivity_roles := {
	"hiv": "sensitive:hiv",
	"sud": "sensitive:sud",
	"eth": "sensitive:sud",
	"psy": "sensitive:psy",
	"sdv": "sensitive:sdv",
	"std": "sensitive:std",
	"sex": "sensitive:sex",
	"restricted": "",
	"very-restricted": "sensitive:very-restricted",
	"vip": "",
	"residence": "",
}

# Labels that allow treatment use only.
treatment_only_labels := {"restricted", "very-restricted"}

# Consent flags understood by this policy; unknown flags are denied.
known_consent := {"opt-out"}

# ---------------------------------------------------------------------------
# Obligation sets, kept as data. Paths are RFC 6901 pointers, "*" matches
# every element of an array. Vocabulary: package minimize.

# Billing (HPAYMT): minimum necessary for claims work. The removals name
# what the biller must not see; the allow-list that ends each set keeps only
# the elements claims work needs, so that the same identifiers and names in
# places the removals do not name (a Reference's identifier or display, a
# contained subscriber or practitioner, an extension's valueString, an
# Encounter's preAdmissionIdentifier) are dropped too: deny by default.
# One rule per type, so that billing_obligations[typ] builds the one set
# it is asked for (as research_obligations; one object of all of them
# built every allow-list, the claims' hundreds of pointers, on every
# first use: a biller's first decision took 4-6 ms instead of 1).
billing_obligations.coverage := [
	{"op": "mask", "path": "/subscriberId", "fn": "last4"},
	# A class of type rxid holds the pharmacy benefit member id (R4
	# coverage-class); a path cannot select a class by its type.
	{"op": "mask", "path": "/class/*/value", "fn": "last4"},
	{"op": "remove", "path": "/identifier"},
	{"op": "remove", "path": "/beneficiary/display"},
	{"op": "remove", "path": "/text"},
	{"op": "scrub", "path": "/class/*/name"},
	# The insurer's name or number for its provider network (R4
	# Coverage.network), which decides in- or out-of-network terms:
	# free text its sender fills as it likes, scrubbed as a class's name.
	{"op": "scrub", "path": "/network"},
	{"op": "allow", "path": "", "fn": concat(",", billing_coverage_elements)},
	billing_pseudonymize,
]

billing_obligations.encounter := [
	{"op": "remove", "path": "/subject/display"},
	{"op": "remove", "path": "/identifier"},
	{"op": "remove", "path": "/text"},
	{"op": "remove", "path": "/participant/*/individual/display"},
	{"op": "scrub", "path": "/serviceProvider/display"},
	{"op": "allow", "path": "", "fn": concat(",", billing_encounter_elements)},
	billing_pseudonymize,
]

# Claims and remittances (below, "Claims, remittances"): identifiers
# masked to their last four characters (a claim number, a prior
# authorization number, a payment's trace number, a supportingInfo's
# valueString: CARIN BB writes the patient's account number and MRN
# there), then the allow-list.
billing_obligations.claim := array.concat(billing_claim_masks, [
	{"op": "mask", "path": "/insurance/*/identifier/value", "fn": "last4"},
	{"op": "mask", "path": "/insurance/*/preAuthRef/*", "fn": "last4"},
	{"op": "allow", "path": "", "fn": concat(",", billing_claim_elements)},
	billing_pseudonymize,
])

billing_obligations.claimresponse := [
	{"op": "mask", "path": "/identifier/*/value", "fn": "last4"},
	{"op": "mask", "path": "/preAuthRef", "fn": "last4"},
	{"op": "mask", "path": "/payment/identifier/value", "fn": "last4"},
	{"op": "allow", "path": "", "fn": concat(",", billing_claimresponse_elements)},
	billing_pseudonymize,
]

billing_obligations.explanationofbenefit := array.concat(billing_claim_masks, [
	{"op": "mask", "path": "/preAuthRef/*", "fn": "last4"},
	{"op": "mask", "path": "/insurance/*/preAuthRef/*", "fn": "last4"},
	{"op": "mask", "path": "/payment/identifier/value", "fn": "last4"},
	{"op": "allow", "path": "", "fn": concat(",", billing_eob_elements)},
	billing_pseudonymize,
])

# Source ids (docs/policy.md, "billing, source ids"): a source makes its
# ids as it likes, of national numbers too (gematik's VSDM 2 examples name
# a Coverage VSDMCoverage-GKV-<KVNR> and its beneficiary
# Patient/VSDMPatient-GKV-<KVNR>; the NHS serves a Patient under its NHS
# number; Synthea's MRN is the Patient's id). Last in every billing set,
# over what the allow-list kept: the resource's id and every literal
# reference become the keyed ids of the resources' custos URIs
# (docs/uris.md), which say nothing without the key and let a biller join
# a Claim, its ClaimResponse and ExplanationOfBenefit and the Coverage by
# the URIs it lists; a reference custos cannot key (an absolute URL, a
# urn:uuid:, a conditional or local #x reference, any reference of a
# manifest import's resource) keeps only its type; a reference to a
# resource the catalog does not hold is keyed all the same (docs/uris.md).
billing_pseudonymize := {"op": "pseudonymize", "path": "", "fn": "keyedid"}

# The masks a Claim and an ExplanationOfBenefit share.
billing_claim_masks := [
	{"op": "mask", "path": "/identifier/*/value", "fn": "last4"},
	{"op": "mask", "path": "/supportingInfo/*/valueString", "fn": "last4"},
]

# What a biller's view of a resource keeps of its Meta: no extension, no
# source.
billing_meta := ["/meta/versionId", "/meta/lastUpdated", "/meta/profile", "/meta/security", "/meta/tag"]

# The members of a Coding a biller reads: its code, system and version.
# Not its display: R4 defines it as the code system's representation of
# the code, but a sender writes there what it likes ("T2DM (E. Marsh)" in
# testdata/fhir-corpus), and custos has no terminology to check it
# against; a claim (X12 837) carries codes, not their displays. Nor an
# extension or an id.
billing_coding_members := ["system", "version", "code"]

# The allow-list pointers of a Coding at path, and of a CodeableConcept at
# path: its codings' members. A CodeableConcept's text is where clinicians
# write narrative ("fall at home, daughter Jane found her"), and a claim
# needs the code: 45 CFR 164.502(b), minimum necessary.
billing_coding(path) := [concat("/", [path, m]) | some m in billing_coding_members]

billing_concept(path) := billing_coding(concat("", [path, "/coding/*"]))

# The Coverage elements a biller reads (FHIR R4 Coverage): references by
# reference and type only (their display and identifier name people: a
# subscriber, a policy holder), a payor's too: a self-pay Coverage's payor
# is the patient or a relative (R4: Reference(Organization | Patient |
# RelatedPerson)), and an insurer is named by its Organization, reference
# data a biller reads. The resource's id and the references of the
# policy holder, the subscriber, the beneficiary, a payor and a contract
# are kept to be renamed by billing_pseudonymize (last in the set): a
# source id may be a national number (gematik's VSDM 2 examples name a
# Coverage VSDMCoverage-GKV-<KVNR> and its beneficiary
# Patient/VSDMPatient-GKV-<KVNR>; the NHS serves a Patient under its NHS
# number), and the keyed ids of the custos URIs (docs/uris.md) name the
# same resources without it. A modifierExtension is kept wherever its element is: R4 forbids
# processing an element as if its modifier were absent. Codes as
# billing_concept keeps them (type, relationship, a class's and a cost's
# type). A class's name is kept, scrubbed of identifier patterns (the
# obligation before the allow-list): it is the group or plan name a claim
# carries (X12 837 SBR04 "Insured Group Name", required when the payer's
# identification of the subscriber includes one; UB-04 FL 61), named by
# the payer or the employer, not the patient. Left out: identifier, text,
# contained, extension (at any depth: allow keeps a listed element
# without its extensions), codes' text and displays, and every element R4
# does not define.
billing_coverage_elements := [p |
	some part in [
		billing_meta,
		[
			"/id", "/modifierExtension", "/status",
			"/policyHolder/reference", "/policyHolder/type", "/subscriber/reference", "/subscriber/type",
			"/subscriberId", "/beneficiary/reference", "/beneficiary/type",
			"/dependent", "/period",
			"/payor/*/reference", "/payor/*/type",
			"/class/*/modifierExtension", "/class/*/value", "/class/*/name",
			"/order", "/network",
			"/costToBeneficiary/*/modifierExtension",
			"/costToBeneficiary/*/valueQuantity", "/costToBeneficiary/*/valueMoney",
			"/costToBeneficiary/*/exception/*/modifierExtension",
			"/costToBeneficiary/*/exception/*/period",
			"/subrogation", "/contract/*/reference", "/contract/*/type",
		],
		billing_concept("/type"), billing_concept("/relationship"), billing_concept("/class/*/type"),
		billing_concept("/costToBeneficiary/*/type"), billing_concept("/costToBeneficiary/*/exception/*/type"),
	]
	some p in part
]

# The Encounter elements a biller reads (FHIR R4 Encounter), references as
# for Coverage (the service provider keeps its display, the facility's
# name, scrubbed of identifier patterns as a Coverage class's name is);
# as for Coverage, the resource's id and the references kept to be renamed
# by billing_pseudonymize, but an account's (billing reads no Account),
# of which only the type. Codes as billing_concept and billing_coding keep them: class,
# type, serviceType, priority (837I's admission type), reasonCode, a
# diagnosis's use, a participant's type, a location's physicalType,
# hospitalization's admitSource, reAdmission and dischargeDisposition
# (837I's admission source and patient status). Left out: identifier,
# text, contained, extension (at any depth), codes' text and displays,
# hospitalization's preAdmissionIdentifier, a location's display,
# hospitalization's dietPreference, specialCourtesy and specialArrangement
# (no claim carries them, and they tell a religion, a VIP, a disability),
# and every element R4 does not define.
billing_encounter_elements := [p |
	some part in [
		billing_meta,
		[
			"/id", "/modifierExtension", "/status",
			"/statusHistory/*/modifierExtension", "/statusHistory/*/status", "/statusHistory/*/period",
			"/classHistory/*/modifierExtension", "/classHistory/*/period",
			"/subject/reference", "/subject/type",
			"/episodeOfCare/*/reference", "/basedOn/*/reference",
			"/participant/*/modifierExtension", "/participant/*/period",
			"/participant/*/individual/reference", "/participant/*/individual/type",
			"/appointment/*/reference", "/period", "/length",
			"/reasonReference/*/reference",
			"/diagnosis/*/modifierExtension", "/diagnosis/*/condition/reference", "/diagnosis/*/rank",
			"/hospitalization/modifierExtension",
			"/hospitalization/origin/reference", "/hospitalization/destination/reference",
			"/location/*/modifierExtension",
			"/location/*/location/reference", "/location/*/status", "/location/*/period",
			"/serviceProvider/reference", "/serviceProvider/display", "/partOf/reference",
		],
		billing_coding("/class"), billing_coding("/classHistory/*/class"),
		billing_concept("/type/*"), billing_concept("/serviceType"), billing_concept("/priority"),
		billing_concept("/reasonCode/*"), billing_concept("/diagnosis/*/use"),
		billing_concept("/participant/*/type/*"), billing_concept("/location/*/physicalType"),
		billing_concept("/hospitalization/admitSource"), billing_concept("/hospitalization/reAdmission"),
		billing_concept("/hospitalization/dischargeDisposition"),
	]
	some p in part
]

# Claims, remittances (HPAYMT): a biller's AI assistant works on Claim
# (X12 837, Da Vinci PAS), ClaimResponse and ExplanationOfBenefit (X12 835,
# CARIN Blue Button). Each keeps what a claim or remittance carries, as
# elsewhere in the billing view: codes (system, version, code), references
# by reference and type (a display or an identifier names a patient, a
# payee, a practitioner: the biller reads the Organization and
# Practitioner, reference data, for the NPI), dates, amounts, quantities,
# sequences and the links between them, identifiers masked to their last
# four characters (billing_obligations). Dropped: text, contained,
# extension (at any depth), every free-text element (disposition: the
# payer's summary, which outcome and the adjudication reason codes, X12
# CARCs, carry; processNote; a benefit balance's name, description and
# allowedString), attachments (form, a supportingInfo's valueAttachment),
# addresses (accident.locationAddress, an item's locationAddress: the
# patient's home, often), a related claim's identifier, an insurance's
# businessArrangement, noteNumber (its note is dropped), and every element
# R4 does not define. A supportingInfo is kept by its category and code
# (C4BB's type of bill, admission type, point of origin, discharge status,
# DRG, claim received date), its timing, a valueBoolean, valueQuantity
# (days' supply, refills), a valueReference's reference, and a valueString
# masked to its last four characters (C4BB writes the patient account
# number and the MRN there; a free text keeps four characters).

# billing_at(path, rels): each of rels below path.
billing_at(path, rels) := [concat("/", [path, r]) | some r in rels]

# billing_codes(path, rels): the codes of the CodeableConcept at each of
# rels below path.
billing_codes(path, rels) := [p | some r in rels; some p in billing_concept(concat("/", [path, r]))]

# A Reference a biller reads: its reference and type only.
billing_reference(path) := billing_at(path, ["reference", "type"])

# A line of a claim (an item, a detail, a subDetail of Claim and
# ExplanationOfBenefit): sequence, revenue, category, product or service,
# modifiers and program codes (837 SV1/SV2, 835 SVC), quantity, unit
# price, factor, net, devices by reference.
billing_line(path) := array.concat(
	billing_at(path, ["modifierExtension", "sequence", "quantity", "unitPrice", "factor", "net", "udi/*/reference"]),
	billing_codes(path, ["revenue", "category", "productOrService", "modifier/*", "programCode/*"]),
)

# An item of a claim: a line, the sequences that link it to the care team,
# diagnoses, procedures and supporting information, the date or period of
# service, the place of service (a code or a Location, not an address),
# body site and encounters.
billing_item(path) := [p |
	some part in [
		billing_line(path),
		billing_at(path, [
			"careTeamSequence", "diagnosisSequence", "procedureSequence", "informationSequence",
			"servicedDate", "servicedPeriod", "locationReference/reference", "encounter/*/reference",
		]),
		billing_codes(path, ["locationCodeableConcept", "bodySite", "subSite/*"]),
	]
	some p in part
]

# The adjudications of the element at path (835 CAS, SVC): category,
# reason codes (X12 CARC), amount and value.
billing_adjudications(path) := array.concat(
	billing_at(concat("/", [path, "adjudication/*"]), ["modifierExtension", "amount", "value"]),
	billing_codes(concat("/", [path, "adjudication/*"]), ["category", "reason"]),
)

# A line the payer added (ClaimResponse, ExplanationOfBenefit addItem);
# sub names its subDetail sequence (ClaimResponse spells it subdetailSequence).
billing_add_item(path, sub) := [p |
	some part in [
		billing_at(path, [
			"modifierExtension", "itemSequence", "detailSequence", sub, "servicedDate", "servicedPeriod",
			"locationReference/reference", "quantity", "unitPrice", "factor", "net",
		]),
		billing_reference(concat("/", [path, "provider/*"])),
		billing_codes(path, ["productOrService", "modifier/*", "programCode/*", "locationCodeableConcept", "bodySite", "subSite/*"]),
		billing_adjudications(path),
		billing_added_line(concat("/", [path, "detail/*"])),
		billing_added_line(concat("/", [path, "detail/*/subDetail/*"])),
	]
	some p in part
]

billing_added_line(path) := [p |
	some part in [
		billing_at(path, ["modifierExtension", "quantity", "unitPrice", "factor", "net"]),
		billing_codes(path, ["productOrService", "modifier/*"]),
		billing_adjudications(path),
	]
	some p in part
]

# The totals and the payment of a remittance (835 CLP, BPR, TRN).
billing_remittance := [p |
	some part in [
		billing_adjudications(""),
		billing_at("/total/*", ["modifierExtension", "amount"]), billing_codes("/total/*", ["category"]),
		billing_at("/payment", ["modifierExtension", "adjustment", "date", "amount", "identifier/system", "identifier/value"]),
		billing_codes("/payment", ["type", "adjustmentReason"]),
	]
	some p in part
]

# What a Claim and an ExplanationOfBenefit share: the claim's header, its
# care team, supporting information, diagnoses (837 HI, with their
# sequence), procedures (codes and dates) and accident.
billing_claim_header := [p |
	some part in [
		billing_meta,
		billing_at("", [
			"id", "modifierExtension", "status", "use", "billablePeriod", "created",
			"identifier/*/use", "identifier/*/system", "identifier/*/value",
			"patient/reference", "patient/type",
		]),
		billing_codes("", ["identifier/*/type", "type", "subType", "priority", "fundsReserve"]),
		billing_reference("/enterer"), billing_reference("/insurer"),
		billing_reference("/provider"), billing_reference("/prescription"), billing_reference("/originalPrescription"),
		billing_reference("/referral"), billing_reference("/facility"),
		billing_at("/related/*", ["modifierExtension", "claim/reference", "claim/type"]), billing_codes("/related/*", ["relationship"]),
		billing_at("/payee", ["modifierExtension", "party/reference", "party/type"]), billing_codes("/payee", ["type"]),
		billing_at("/careTeam/*", ["modifierExtension", "sequence", "responsible"]),
		billing_reference("/careTeam/*/provider"), billing_codes("/careTeam/*", ["role", "qualification"]),
		billing_at("/supportingInfo/*", [
			"modifierExtension", "sequence", "timingDate", "timingPeriod",
			"valueBoolean", "valueString", "valueQuantity", "valueReference/reference",
		]),
		billing_codes("/supportingInfo/*", ["category", "code", "reason"]),
		billing_at("/diagnosis/*", ["modifierExtension", "sequence", "diagnosisReference/reference"]),
		billing_codes("/diagnosis/*", ["diagnosisCodeableConcept", "type/*", "onAdmission", "packageCode"]),
		billing_at("/procedure/*", ["modifierExtension", "sequence", "date", "procedureReference/reference", "udi/*/reference"]),
		billing_codes("/procedure/*", ["type/*", "procedureCodeableConcept"]),
		billing_at("/accident", ["modifierExtension", "date", "locationReference/reference"]), billing_codes("/accident", ["type"]),
	]
	some p in part
]

# Claims, remittances and their responses keep no source id (as Coverage
# and Encounter: billing, source ids in docs/policy.md): the resource's
# id and the references of the patient, the payee's party, the coverage
# (a Coverage named by a member number, VSDMCoverage-GKV-<KVNR>), the
# claim, claim response or request (a claim named by its number) are
# kept to be renamed by billing_pseudonymize, so a biller joins a Claim,
# its ClaimResponse and ExplanationOfBenefit and the Coverage by the
# keyed ids of their URIs.
#
# The Claim elements a biller reads (FHIR R4 Claim): the header, the
# insurances (sequence, focal, the coverage, a prior authorization number
# masked), the items with their details and subDetails, the total.
billing_claim_elements := [p |
	some part in [
		billing_claim_header,
		billing_at("/insurance/*", [
			"modifierExtension", "sequence", "focal", "identifier/system", "identifier/value",
			"coverage/reference", "coverage/type", "preAuthRef", "claimResponse/reference", "claimResponse/type",
		]),
		["/total"],
		billing_item("/item/*"), billing_line("/item/*/detail/*"), billing_line("/item/*/detail/*/subDetail/*"),
	]
	some p in part
]

# The ExplanationOfBenefit elements a biller reads (FHIR R4
# ExplanationOfBenefit; CARIN BB): the claim's, each line with its
# adjudications, the lines the payer added, the outcome, the totals, the
# payment and the benefit balances (amounts and codes, not their name or
# description).
billing_eob_elements := [p |
	some part in [
		billing_claim_header,
		billing_at("", [
			"outcome", "preAuthRef", "preAuthRefPeriod", "precedence", "benefitPeriod",
			"claim/reference", "claim/type", "claimResponse/reference", "claimResponse/type",
		]),
		billing_codes("", ["fundsReserveRequested", "formCode"]),
		billing_at("/insurance/*", ["modifierExtension", "focal", "coverage/reference", "coverage/type", "preAuthRef"]),
		billing_item("/item/*"), billing_adjudications("/item/*"),
		billing_line("/item/*/detail/*"), billing_adjudications("/item/*/detail/*"),
		billing_line("/item/*/detail/*/subDetail/*"), billing_adjudications("/item/*/detail/*/subDetail/*"),
		billing_add_item("/addItem/*", "subDetailSequence"),
		billing_remittance,
		billing_at("/benefitBalance/*", ["modifierExtension", "excluded"]),
		billing_codes("/benefitBalance/*", ["category", "network", "unit", "term"]),
		billing_at("/benefitBalance/*/financial/*", ["modifierExtension", "allowedUnsignedInt", "allowedMoney", "usedUnsignedInt", "usedMoney"]),
		billing_codes("/benefitBalance/*/financial/*", ["type"]),
	]
	some p in part
]

# The ClaimResponse elements a biller reads (FHIR R4 ClaimResponse): the
# header, each item's, detail's and subDetail's adjudications by sequence,
# the lines the payer added, the totals, the payment, the insurances and
# the errors' codes.
billing_claimresponse_elements := [p |
	some part in [
		billing_meta,
		billing_at("", [
			"id", "modifierExtension", "status", "use", "created", "outcome", "preAuthRef", "preAuthPeriod",
			"identifier/*/use", "identifier/*/system", "identifier/*/value",
			"request/reference", "request/type", "patient/reference", "patient/type",
			"communicationRequest/*/reference",
		]),
		billing_codes("", ["identifier/*/type", "type", "subType", "payeeType", "fundsReserve", "formCode"]),
		billing_reference("/insurer"), billing_reference("/requestor"),
		billing_at("/item/*", ["modifierExtension", "itemSequence"]), billing_adjudications("/item/*"),
		billing_at("/item/*/detail/*", ["modifierExtension", "detailSequence"]), billing_adjudications("/item/*/detail/*"),
		billing_at("/item/*/detail/*/subDetail/*", ["modifierExtension", "subDetailSequence"]),
		billing_adjudications("/item/*/detail/*/subDetail/*"),
		billing_add_item("/addItem/*", "subdetailSequence"),
		billing_remittance,
		billing_at("/insurance/*", [
			"modifierExtension", "sequence", "focal",
			"coverage/reference", "coverage/type", "claimResponse/reference", "claimResponse/type",
		]),
		billing_at("/error/*", ["modifierExtension", "itemSequence", "detailSequence", "subDetailSequence"]),
		billing_codes("/error/*", ["code"]),
	]
	some p in part
]

# Research (HRESCH): HIPAA Safe Harbor de-identification (45 CFR
# 164.514(b)(2)) of every FHIR type a researcher may read, by one
# obligation: deidentify:safeharbor. Package minimize applies it by walking
# every element of the resource by its FHIR R4 data type (docs/policy.md,
# "Research view"): free text, narrative, notes, identifiers, names,
# contact points, extensions not on its allow-list and references other
# than to the patient (shown under the caller's research alias) are
# dropped; dates become the year, birth dates over age 89 are withheld,
# addresses keep state and ZIP3. The output stays valid FHIR R4.
# Free-text notes, PDF reports and images are not research types: names in
# free text cannot be found by patterns, and binary content cannot be
# minimized, so Safe Harbor cannot be met for them.
research_deidentify := [{"op": "deidentify", "path": "", "fn": "safeharbor"}]

# The research types: structured clinical FHIR types of the Patient
# compartment and the reference types. Types that carry documents
# (DocumentReference, DiagnosticReport, Media, Binary, Composition) and
# free-text types (Communication, ClinicalImpression, ...) are not research
# types, like notes.
research_fhir_types := {
	"patient", "observation", "condition", "medicationrequest", "encounter", "coverage",
	"allergyintolerance", "procedure", "immunization", "medicationadministration",
	"medicationstatement", "medicationdispense", "careplan", "goal", "servicerequest",
	"familymemberhistory", "imagingstudy", "specimen",
}

# A partial object, so that research_obligations[typ] evaluates the one key
# it is asked for (a comprehension built all of them on every first use).
research_obligations[typ] := research_deidentify if some typ in research_fhir_types

research_obligations[typ] := research_deidentify if some typ in reference_types

# ---------------------------------------------------------------------------
# Entry points.

default decision := {"allow": false, "reasons": ["action_unknown"], "obligations": []}

decision := templates_decision if input.action == "templates"

decision := resource_decision if input.action in {"list", "read"}

# One resource (input.resource, input.break_glass), decided by
# resource_decisions like an item of a list page. Missing resource fields
# take the defaults given to object.get, which decide exactly as a missing
# field would ("" is no tenant, no type and no patient; [] no label). Each
# field is read by name (object.get with a constant key), never
# input.resource as a whole, so that the engine can see that no rule reads
# the resource's URI and cache a principal's decision for every resource
# that differs only in its URI (docs/policy.md, "Decision cache").
resource_decision := resource_decisions([item])[0] if {
	has_resource
	item := {
		"resource": {
			"type": object.get(input.resource, "type", ""),
			"patient": object.get(input.resource, "patient", ""),
			"tenant": object.get(input.resource, "tenant", ""),
			"sensitivity": object.get(input.resource, "sensitivity", []),
			"consent": object.get(input.resource, "consent", []),
		},
		"break_glass": object.get(input, "break_glass", null),
	}
} else := class_decision(request_denies, false, null, null, false, false, null, false, [], [])

has_resource if is_object(input.resource)

# A list page: input.items is [{"resource": {...}, "break_glass": {...} or null}]
# (the engine always sets both keys and every resource field but "uri", which
# it leaves out since no rule here reads input.resource.uri), and
# decisions[i] is the decision about input.items[i], exactly as decision would
# be for that resource and grant.
decisions := resource_decisions(input.items) if input.action in {"list", "read"}

# The single rule set for list and read. It must not read input.action.
# class_decision decides one combination of resource features; the features
# are computed here, inline, because this runs once per list item:
#   ref:    the resource is tenant-level (labels.patient is ""): reference
#           data, decided by reference_grant instead of the role grants;
#   care:   the patient is in the principal's care team;
#   bg:     the break-the-glass grant of the item (null if none);
#   bg_ok:  the grant names this resource's patient.
# care matters only to the care grant and bg, bg_ok only to the break-glass
# grant (see grant and no_grant), so each grant mode computes only its own
# and passes false/null for the others: a page costs a few expressions per
# item. A rule that comes to need a feature in another mode (for example a
# deny when a researcher treats the patient) must compute it in that mode's
# branch below: elsewhere it reads "no relationship", and the batch-equals-
# single tests cannot notice, since both entry points share this function.
resource_decisions(items) := [class_decision(
	request_denies, true, r.type, r.tenant, r.patient == "",
	r.patient in care_relationship_patients, null, false,
	r.sensitivity, r.consent,
) |
	some item in items
	r := item.resource
] if {
	grant_mode == "care"
} else := [class_decision(
	request_denies, true, r.type, r.tenant, r.patient == "", false,
	item.break_glass, r.patient == object.get(item, ["break_glass", "patient"], null),
	r.sensitivity, r.consent,
) |
	some item in items
	r := item.resource
] if {
	grant_mode == "break_glass"
} else := [class_decision(request_denies, true, r.type, r.tenant, r.patient == "", false, null, false, r.sensitivity, r.consent) |
	some item in items
	r := item.resource
]

# ---------------------------------------------------------------------------
# Request-level checks shared by every action; complete rules, so they are
# evaluated once per query however many resources it decides.
#
# Beware: in Rego, `not f(input.missing)` and `not x in input.missing` can be
# undefined rather than true when the reference is undefined (the arguments
# are evaluated outside the negation), which would silently skip a deny.
# Negated checks therefore go through helper rules (`not has_role(r)`,
# `not billing_type(typ)`), which are plainly false when the value is missing.

request_denies contains "purpose_of_use_missing" if purpose_missing

# The membership check comes first: for a known purpose the body fails at
# once, without evaluating purpose_missing again.
request_denies contains "purpose_of_use_unknown" if {
	not input.purpose_of_use in known_purposes
	not purpose_missing
}

request_denies contains "subject_missing" if not subject_present

purpose_missing if not input.purpose_of_use

purpose_missing if input.purpose_of_use == ""

subject_present if {
	is_string(input.principal.sub)
	input.principal.sub != ""
}

# Templates carry no PHI: any authenticated principal with a known purpose.
templates_decision := {"allow": true, "reasons": ["templates_no_phi"], "obligations": []} if {
	count(request_denies) == 0
} else := {"allow": false, "reasons": sort(request_denies), "obligations": []}

# Denies that depend on the principal's roles only. (The request-level
# denies, request_denies, reach class_decision as its argument req instead:
# they read the principal's sub, which the decision about a combination of
# resource features therefore never does, so that custos can share it
# between principals with the same roles, tenant and purpose.)

# Auditors review the audit log; they never read PHI, whatever other roles they hold.
principal_denies contains "auditor_no_phi_access" if input.principal.roles[_] == "auditor"

has_role(r) if input.principal.roles[_] == r

# The tenant resources must belong to: [] when the principal has none, so
# that no resource matches.
principal_tenants := [t | t := input.principal.tenant; t != ""]

# Which grant the principal and purpose can earn. The purposes of the four
# bodies are disjoint, so at most one applies; should two ever apply,
# evaluation fails with a conflict error, which the engine turns into a denial.
grant_mode := "care" if {
	input.purpose_of_use == "TREAT"
	input.principal.roles[_] == "clinician"
}

# Break-the-glass: a clinician with purpose ETREAT and an active grant for
# the resource's patient (the server looks the grant up in the grants store
# and passes it as break_glass) reads without a care relationship.
grant_mode := "break_glass" if {
	input.purpose_of_use == "ETREAT"
	input.principal.roles[_] == "clinician"
}

grant_mode := "billing" if {
	input.purpose_of_use == "HPAYMT"
	input.principal.roles[_] == "billing"
}

grant_mode := "research" if {
	input.purpose_of_use == "HRESCH"
	input.principal.roles[_] == "researcher"
}

# Nothing is visible: no resource, whatever its labels and whatever
# break-the-glass grant comes with it, can be allowed to this principal for
# this purpose. It reads the principal and the purpose only, never a
# resource, a grant or the action, and holds exactly when one of the
# conditions below does, each of which denies every resource on its own in
# class_decision, the one decision function for list and read:
#   - a request-level deny (request_denies): class_decision allows only
#     when req is empty;
#   - a principal deny (principal_denies, e.g. auditor_no_phi_access): part
#     of class_denies (and resource_denies) for every resource;
#   - no tenant (principal_tenants is []): every resource is
#     tenant_mismatch;
#   - no grant mode: pick_grant, reference data included, is then
#     undefined for every resource. (Every grant mode allows some resource:
#     care, break_glass and billing read reference data, research its
#     types; a break-the-glass grant counts only in mode break_glass.)
# The server lists one empty page without scanning when it holds, and the
# engine enforces it: a list or read decision for such a principal denies
# whatever the rules above say (docs/policy.md, "Nothing visible").
default nothing_visible := false

nothing_visible if count(request_denies) > 0

nothing_visible if count(principal_denies) > 0

nothing_visible if count(principal_tenants) == 0

nothing_visible if not grant_mode

# The care team, as the patients a resource may concern to be in it; ""
# never counts.
care_relationship_patients := input.principal.patients if {
	not "" in input.principal.patients
} else := [p | some p in input.principal.patients; p != ""]

# An opt-out stops every use but treatment, emergency treatment included.
optout_blocks if not input.purpose_of_use in {"TREAT", "ETREAT"}

# Why no grant applied, as far as the principal and purpose tell.
role_purposes := {"clinician": {"TREAT", "ETREAT"}, "billing": {"HPAYMT"}, "researcher": {"HRESCH"}}

principal_no_grant contains "purpose_not_permitted" if {
	some role in input.principal.roles
	role_purposes[role]
	not input.purpose_of_use in role_purposes[role]
}

principal_no_grant contains "role_not_permitted" if not any_granting_role

any_granting_role if {
	some role in input.principal.roles
	role_purposes[role]
}

# ---------------------------------------------------------------------------
# The decision about one combination of resource features. req is the set of
# request-level denies (request_denies); has_res is false only for a request
# without a resource object. It reads the principal's roles, tenant and
# purpose of use, and nothing else of the input. pick_grant is asked once
# before the else: OPA memoizes a function's defined values only, so a
# missing grant asked for in two branches was evaluated twice.

class_decision(req, has_res, typ, tenant, ref, care, bg, bg_ok, sens, consent) := granted_decision(
	pick_grant(grant_mode, typ, ref, care, bg, bg_ok, sens),
	req | class_denies(has_res, typ, tenant, sens, consent),
	sens,
) if {
	pick_grant(grant_mode, typ, ref, care, bg, bg_ok, sens)
} else := {
	"allow": false,
	"reasons": no_grant_reasons(req, has_res, typ, tenant, ref, care, bg, bg_ok, sens, consent),
	"obligations": [],
}

# The decision when grant g applies: allowed unless something denies.
granted_decision(g, denies, sens) := {
	"allow": true,
	"reasons": allow_reasons(g, sens),
	"obligations": g.obligations,
} if {
	count(denies) == 0
} else := {
	"allow": false,
	"reasons": sort(denies),
	"obligations": [],
}

# A tenant-level resource is decided by reference_grant, anything else by
# the role grants.
#
# The functions below test their mode and flag arguments in the body
# (ref == true, mode == "care"), not with constants in the head: OPA's rule
# index picks a function's definitions by such equalities in the body, but
# tries every definition whose head holds the constant (each a failed
# unification, for every call).
pick_grant(mode, typ, ref, _, _, _, sens) := reference_grant(mode, typ, sens) if ref == true

pick_grant(mode, typ, ref, care, bg, bg_ok, _) := grant(mode, typ, care, bg, bg_ok) if ref == false

# A patient's home (label residence) is never reference data, whatever its
# type: see sensitivity_roles.
reference_grant(mode, typ, sens) := {"reasons": ["reference_data"], "obligations": []} if {
	mode in {"care", "break_glass", "billing"}
	reference_type(typ)
	not residence(sens)
}

reference_grant("research", typ, sens) := {"reasons": ["research_deidentified"], "obligations": research_deidentify} if {
	reference_type(typ)
	not residence(sens)
}

reference_type(typ) if typ in reference_types

residence(sens) if "residence" in sens

# Allowed decisions about a VIP patient carry "vip_patient" so that the audit
# record flags them for review.
allow_reasons(g, sens) := array.concat(g.reasons, ["vip_patient"]) if {
	sens[_] == "vip"
} else := g.reasons

# A deny without a grant lists the denies and why no grant applied.
no_grant_reasons(req, has_res, typ, tenant, ref, care, bg, bg_ok, sens, consent) := reasons if {
	denies := req | class_denies(has_res, typ, tenant, sens, consent)
	reasons := sort((denies | principal_no_grant) | {code | code := pick_no_grant(grant_mode, typ, ref, care, bg, bg_ok, sens)})
	count(reasons) > 0
} else := ["no_matching_grant"]

pick_no_grant(_, typ, ref, _, _, _, _) := "reference_type_not_permitted" if {
	ref == true
	not reference_type(typ)
}

pick_no_grant(_, typ, ref, _, _, _, sens) := "patient_residence_not_reference_data" if {
	ref == true
	reference_type(typ)
	residence(sens)
}

pick_no_grant(mode, typ, ref, care, bg, bg_ok, _) := no_grant(mode, typ, care, bg, bg_ok) if ref == false

# The denies of one combination of resource features: resource_denies,
# answered without building its deny sets in the common case, a resource of
# the principal's tenant, of a known type, without labels or consent flags,
# which only the principal's own denies can deny. (TestRegoUnitTestsDetectMutations
# checks that each of its conditions matters.)
class_denies(has_res, typ, tenant, sens, consent) := principal_denies if {
	has_res == true
	tenant in principal_tenants
	known_type(typ)
	sens == []
	consent == []
} else := resource_denies(has_res, typ, tenant, sens, consent)

# resource_denies keeps constants in its heads (see pick_grant): it is
# reached off the common path only, and custos policy eval names the rule
# by them.
resource_denies(false, _, _, _, _) := principal_denies | {"resource_missing"}

resource_denies(true, typ, tenant, sens, consent) := (((principal_denies | tenant_denies) | type_denies) | label_denies) | consent_denies if {
	tenant_denies := {"tenant_mismatch" | not tenant in principal_tenants}
	type_denies := {"resource_type_unknown" | not known_type(typ)}
	label_denies := {code | some label in sens; code := label_deny(label)} | {code | some label in sens; code := label_role_deny(label)}
	consent_denies := {code | some flag in consent; code := consent_deny(flag)}
}

label_deny(label) := "sensitivity_label_unknown" if not label_known(label)

label_known(label) if sensitivity_roles[label]

label_deny(label) := "restricted_use_only_treatment" if {
	label in treatment_only_labels
	not treatment_mode
}

treatment_mode if grant_mode in {"care", "break_glass"}

# A label can deny for two reasons at once (very-restricted outside
# treatment and without its role), so the role's reason is a function of
# its own: two definitions of one function giving different values for one
# label are a conflict, which fails the whole evaluation (a list page with
# such a resource would fail for every item on it).
label_role_deny(label) := "sensitive_category_requires_role" if {
	needed := sensitivity_roles[label]
	needed != ""
	not has_role(needed)
}

consent_deny(flag) := "patient_opted_out" if {
	flag == "opt-out"
	optout_blocks
}

consent_deny(flag) := "consent_flag_unknown" if not flag in known_consent

# The grant: which role permits the request, and with which obligations.
grant(mode, _, care, _, _) := {"reasons": ["clinician_care_team"], "obligations": []} if {
	mode == "care"
	care == true
}

# The grant id goes into the reasons so that every audit record of such a
# read names it. Sensitive categories still need their role.
grant(mode, _, _, bg, bg_ok) := {"reasons": ["break_glass", concat("", ["grant=", bg.grant])], "obligations": []} if {
	mode == "break_glass"
	bg_ok == true
	break_glass_valid(bg)
}

grant(mode, typ, _, _, _) := {"reasons": ["billing_payment"], "obligations": billing_obligations[typ]} if mode == "billing"

grant(mode, typ, _, _, _) := {
	"reasons": ["research_deidentified"],
	"obligations": research_obligations[typ],
} if mode == "research"

# A grant names a patient (bg_ok says it is the resource's) and has an id.
break_glass_valid(bg) if {
	is_string(bg.grant)
	bg.grant != ""
	bg.patient != ""
}

no_grant(mode, _, care, _, _) := "no_care_relationship" if {
	mode == "care"
	care == false
}

no_grant(mode, _, _, bg, bg_ok) := "break_glass_grant_required" if {
	mode == "break_glass"
	not break_glass_covers(bg, bg_ok)
}

no_grant(mode, typ, _, _, _) := "resource_type_not_permitted" if {
	mode == "billing"
	not billing_type(typ)
}

no_grant(mode, typ, _, _, _) := "resource_type_not_permitted" if {
	mode == "research"
	not research_type(typ)
}

break_glass_covers(bg, true) if break_glass_valid(bg)

billing_type(typ) if billing_obligations[typ]

research_type(typ) if research_obligations[typ]

# Every concrete FHIR R4 resource type (FHIR 4.0.1), lowercase: the types a
# fhir:// URI may carry, as in store/fhirtypes_gen.go (generated by
# tools/fhirtypes from the R4 StructureDefinitions). rego_test.go
# (TestFHIRTypesMatchStore) keeps the two lists equal.
fhir_r4_types := {
	"account",
	"activitydefinition",
	"adverseevent",
	"allergyintolerance",
	"appointment",
	"appointmentresponse",
	"auditevent",
	"basic",
	"binary",
	"biologicallyderivedproduct",
	"bodystructure",
	"bundle",
	"capabilitystatement",
	"careplan",
	"careteam",
	"catalogentry",
	"chargeitem",
	"chargeitemdefinition",
	"claim",
	"claimresponse",
	"clinicalimpression",
	"codesystem",
	"communication",
	"communicationrequest",
	"compartmentdefinition",
	"composition",
	"conceptmap",
	"condition",
	"consent",
	"contract",
	"coverage",
	"coverageeligibilityrequest",
	"coverageeligibilityresponse",
	"detectedissue",
	"device",
	"devicedefinition",
	"devicemetric",
	"devicerequest",
	"deviceusestatement",
	"diagnosticreport",
	"documentmanifest",
	"documentreference",
	"effectevidencesynthesis",
	"encounter",
	"endpoint",
	"enrollmentrequest",
	"enrollmentresponse",
	"episodeofcare",
	"eventdefinition",
	"evidence",
	"evidencevariable",
	"examplescenario",
	"explanationofbenefit",
	"familymemberhistory",
	"flag",
	"goal",
	"graphdefinition",
	"group",
	"guidanceresponse",
	"healthcareservice",
	"imagingstudy",
	"immunization",
	"immunizationevaluation",
	"immunizationrecommendation",
	"implementationguide",
	"insuranceplan",
	"invoice",
	"library",
	"linkage",
	"list",
	"location",
	"measure",
	"measurereport",
	"media",
	"medication",
	"medicationadministration",
	"medicationdispense",
	"medicationknowledge",
	"medicationrequest",
	"medicationstatement",
	"medicinalproduct",
	"medicinalproductauthorization",
	"medicinalproductcontraindication",
	"medicinalproductindication",
	"medicinalproductingredient",
	"medicinalproductinteraction",
	"medicinalproductmanufactured",
	"medicinalproductpackaged",
	"medicinalproductpharmaceutical",
	"medicinalproductundesirableeffect",
	"messagedefinition",
	"messageheader",
	"molecularsequence",
	"namingsystem",
	"nutritionorder",
	"observation",
	"observationdefinition",
	"operationdefinition",
	"operationoutcome",
	"organization",
	"organizationaffiliation",
	"parameters",
	"patient",
	"paymentnotice",
	"paymentreconciliation",
	"person",
	"plandefinition",
	"practitioner",
	"practitionerrole",
	"procedure",
	"provenance",
	"questionnaire",
	"questionnaireresponse",
	"relatedperson",
	"requestgroup",
	"researchdefinition",
	"researchelementdefinition",
	"researchstudy",
	"researchsubject",
	"riskassessment",
	"riskevidencesynthesis",
	"schedule",
	"searchparameter",
	"servicerequest",
	"slot",
	"specimen",
	"specimendefinition",
	"structuredefinition",
	"structuremap",
	"subscription",
	"subscriptionstatus",
	"substance",
	"substancenucleicacid",
	"substancepolymer",
	"substanceprotein",
	"substancereferenceinformation",
	"substancesourcematerial",
	"substancespecification",
	"supplydelivery",
	"supplyrequest",
	"task",
	"terminologycapabilities",
	"testreport",
	"testscript",
	"valueset",
	"verificationresult",
	"visionprescription",
}
