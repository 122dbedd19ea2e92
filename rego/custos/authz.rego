# custos default authorization policy.
#
# Query: data.custos.authz.decision
# Input: see docs/policy.md ("Input"). Output:
#   {"allow": bool, "reasons": [string], "obligations": [{"op", "path", "fn"?}]}
#
# Invariants:
#   - Deny by default: anything not granted below is denied.
#   - "list" and "read" are decided by the same rule (resource_decision), which
#     never looks at input.action, so a list never shows what a read would deny.
#   - Every deny carries at least one short snake_case reason code.
package custos.authz

# HL7 v3 ActReason purpose-of-use codes the server understands.
known_purposes := {
	"TREAT", "ETREAT", "HPAYMT", "HOPERAT", "HRESCH",
	"HMARKT", "COVERAGE", "PUBHLTH", "PATRQT",
}

# Resource types served by the store (lowercase).
# FHIR R4 JSON: patient, observation, condition, medicationrequest, encounter,
# coverage. Documents: note (text/markdown), report (application/pdf),
# image (image/png).
known_types := {
	"patient", "observation", "condition", "medicationrequest", "encounter", "coverage",
	"note", "report", "image",
}

# Sensitivity labels and the extra role each one needs. A label mapped to ""
# needs no extra role. Labels not listed here are denied (fail closed).
sensitivity_roles := {
	"hiv": "sensitive:hiv",
	"sud": "sensitive:sud",
	"vip": "",
}

# Consent flags understood by this policy; unknown flags are denied.
known_consent := {"opt-out"}

# ---------------------------------------------------------------------------
# Obligation sets, kept as data. Paths are RFC 6901 pointers, "*" matches
# every element of an array. Vocabulary: package minimize.

# Billing (HPAYMT): minimum necessary for claims work.
billing_obligations := {
	"coverage": [
		{"op": "mask", "path": "/subscriberId", "fn": "last4"},
		{"op": "remove", "path": "/identifier"},
		{"op": "remove", "path": "/beneficiary/display"},
		{"op": "remove", "path": "/text"},
	],
	"encounter": [
		{"op": "remove", "path": "/subject/display"},
		{"op": "remove", "path": "/identifier"},
		{"op": "remove", "path": "/text"},
		{"op": "remove", "path": "/participant/*/individual/display"},
	],
}

# Research (HRESCH): HIPAA Safe Harbor de-identification (45 CFR
# 164.514(b)(2)). A researcher's obligations for a type are
# research_obligations[type] (generalize the dates and ZIP codes researchers
# keep, remove the known identifier elements) followed by one allow-list
# obligation built from research_allow[type], which keeps only the elements
# named there: identifiers the removal lists do not foresee (resource ids,
# references such as "Patient/<id>", extensions, free text) are withheld.
# A type with removals but no allow-list is denied (no grant).
# Free-text notes, PDF reports and images are not research types: names in
# free text cannot be found by patterns, and binary content cannot be
# minimized, so Safe Harbor cannot be met for them.
research_patient_obligations := [
	{"op": "remove", "path": "/meta"},
	{"op": "remove", "path": "/name"},
	{"op": "remove", "path": "/telecom"},
	{"op": "remove", "path": "/identifier"},
	{"op": "remove", "path": "/text"},
	{"op": "remove", "path": "/contact"},
	{"op": "remove", "path": "/photo"},
	{"op": "remove", "path": "/extension"},
	{"op": "remove", "path": "/address/*/line"},
	{"op": "remove", "path": "/address/*/city"},
	{"op": "remove", "path": "/address/*/district"},
	{"op": "remove", "path": "/address/*/text"},
	{"op": "remove", "path": "/address/*/period"},
	{"op": "remove", "path": "/_birthDate"},
	{"op": "remove", "path": "/deceasedDateTime"},
	{"op": "remove", "path": "/generalPractitioner"},
	{"op": "remove", "path": "/managingOrganization"},
	{"op": "remove", "path": "/link"},
	{"op": "generalize", "path": "/address/*/postalCode", "fn": "zip3"},
	{"op": "generalize", "path": "/birthDate", "fn": "birthyear90"},
]

# Applied to every clinical FHIR type; paths a resource does not have are no-ops.
research_clinical_obligations := [
	{"op": "remove", "path": "/meta"},
	{"op": "remove", "path": "/text"},
	{"op": "remove", "path": "/identifier"},
	{"op": "remove", "path": "/subject/display"},
	{"op": "remove", "path": "/note"},
	{"op": "remove", "path": "/performer/*/display"},
	{"op": "remove", "path": "/requester/display"},
	{"op": "remove", "path": "/recorder/display"},
	{"op": "remove", "path": "/participant/*/individual/display"},
	{"op": "generalize", "path": "/effectiveDateTime", "fn": "year"},
	{"op": "generalize", "path": "/issued", "fn": "year"},
	{"op": "generalize", "path": "/onsetDateTime", "fn": "year"},
	{"op": "generalize", "path": "/abatementDateTime", "fn": "year"},
	{"op": "generalize", "path": "/recordedDate", "fn": "year"},
	{"op": "generalize", "path": "/authoredOn", "fn": "year"},
	{"op": "generalize", "path": "/period/start", "fn": "year"},
	{"op": "generalize", "path": "/period/end", "fn": "year"},
	# Other date forms of the same elements: removed rather than generalized.
	{"op": "remove", "path": "/effectivePeriod"},
	{"op": "remove", "path": "/effectiveInstant"},
	{"op": "remove", "path": "/onsetPeriod"},
	{"op": "remove", "path": "/onsetString"},
	{"op": "remove", "path": "/abatementPeriod"},
	{"op": "remove", "path": "/abatementString"},
	{"op": "remove", "path": "/dispenseRequest"},
	{"op": "remove", "path": "/location"},
	{"op": "remove", "path": "/hospitalization"},
]

research_coverage_obligations := [
	{"op": "remove", "path": "/meta"},
	{"op": "remove", "path": "/text"},
	{"op": "remove", "path": "/identifier"},
	{"op": "remove", "path": "/subscriberId"},
	{"op": "remove", "path": "/subscriber"},
	{"op": "remove", "path": "/policyHolder"},
	{"op": "remove", "path": "/beneficiary"},
	{"op": "remove", "path": "/dependent"},
	{"op": "remove", "path": "/payor"},
	{"op": "remove", "path": "/class"},
	{"op": "remove", "path": "/contract"},
	{"op": "generalize", "path": "/period/start", "fn": "year"},
	{"op": "generalize", "path": "/period/end", "fn": "year"},
]

research_obligations := {
	"patient": research_patient_obligations,
	"observation": research_clinical_obligations,
	"condition": research_clinical_obligations,
	"medicationrequest": research_clinical_obligations,
	"encounter": research_clinical_obligations,
	"coverage": research_coverage_obligations,
}

# What a researcher may see of each type (JSON pointers; "*" is every array
# element; resourceType is always kept). Every date element listed here is
# generalized to the year (birthDate: to the year, or "90+" over age 89) and
# every ZIP to ZIP3 by research_obligations before the allow-list applies.
# Not listed, hence withheld, for every type: id, meta, text, identifier,
# extension, contained, every Reference (subject, patient, encounter,
# performer, requester, recorder, participant, beneficiary, payor, ...),
# notes, free-text strings (valueString, dosage text), ages (onsetAge).
research_allow := {
	"patient": [
		"/gender", "/birthDate", "/deceasedBoolean",
		"/address/*/state", "/address/*/postalCode", "/address/*/country",
		"/communication/*/language",
	],
	"observation": [
		"/status", "/category", "/code", "/effectiveDateTime", "/issued",
		"/valueQuantity", "/valueCodeableConcept", "/valueBoolean", "/valueInteger",
		"/interpretation", "/bodySite", "/method",
		"/referenceRange/*/low", "/referenceRange/*/high",
		"/component/*/code", "/component/*/valueQuantity", "/component/*/valueCodeableConcept",
	],
	"condition": [
		"/clinicalStatus", "/verificationStatus", "/category", "/severity", "/code", "/bodySite",
		"/onsetDateTime", "/abatementDateTime", "/recordedDate",
	],
	"medicationrequest": [
		"/status", "/intent", "/category", "/priority", "/medicationCodeableConcept", "/authoredOn",
		"/reasonCode", "/courseOfTherapyType",
		"/dosageInstruction/*/timing/code", "/dosageInstruction/*/timing/repeat/frequency",
		"/dosageInstruction/*/timing/repeat/period", "/dosageInstruction/*/timing/repeat/periodUnit",
		"/dosageInstruction/*/route", "/dosageInstruction/*/doseAndRate/*/doseQuantity",
		"/dosageInstruction/*/asNeededBoolean",
	],
	"encounter": [
		"/status", "/class", "/type", "/serviceType", "/priority",
		"/period/start", "/period/end", "/length", "/reasonCode",
	],
	"coverage": ["/status", "/type", "/relationship", "/period/start", "/period/end"],
}

# The allow-list obligation of a research type; undefined for a type without
# an allow-list.
research_allow_obligation(typ) := {"op": "allow", "path": "", "fn": concat(",", research_allow[typ])}

# ---------------------------------------------------------------------------
# Entry point.

default decision := {"allow": false, "reasons": ["action_unknown"], "obligations": []}

decision := templates_decision if input.action == "templates"

decision := resource_decision if input.action in {"list", "read"}

# ---------------------------------------------------------------------------
# Request-level checks shared by every action.
#
# Conditions are written against input directly (input.x == "v",
# input.xs[_] == "v") where possible so that OPA's rule index skips rules that
# cannot match, which keeps decisions fast.
#
# Beware: in Rego, `not f(input.missing)` and `not x in input.missing` can be
# undefined rather than true when the reference is undefined (the arguments
# are evaluated outside the negation), which would silently skip a deny.
# Negated checks therefore go through helper rules (`not has_resource`,
# `not has_role(r)`, `not known_type`), which are plainly false when the input
# field is missing.

request_denies contains "purpose_of_use_missing" if purpose_missing

request_denies contains "purpose_of_use_unknown" if {
	not purpose_missing
	not input.purpose_of_use in known_purposes
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

# ---------------------------------------------------------------------------
# The single rule set for list and read. It must not read input.action.

resource_denies contains r if some r in request_denies

resource_denies contains "resource_missing" if not has_resource

has_resource if is_object(input.resource)

resource_denies contains "tenant_mismatch" if {
	has_resource
	not same_tenant
}

same_tenant if {
	input.principal.tenant != ""
	input.resource.tenant == input.principal.tenant
}

resource_denies contains "resource_type_unknown" if {
	has_resource
	not known_type
}

known_type if input.resource.type in known_types

# Auditors review the audit log; they never read PHI, whatever other roles they hold.
resource_denies contains "auditor_no_phi_access" if input.principal.roles[_] == "auditor"

resource_denies contains "sensitive_category_requires_role" if {
	some label in input.resource.sensitivity
	needed := sensitivity_roles[label]
	needed != ""
	not has_role(needed)
}

has_role(r) if input.principal.roles[_] == r

resource_denies contains "sensitivity_label_unknown" if {
	some label in input.resource.sensitivity
	not sensitivity_roles[label]
}

# An opt-out stops every use but treatment, emergency treatment included.
resource_denies contains "patient_opted_out" if {
	input.resource.consent[_] == "opt-out"
	not input.purpose_of_use in {"TREAT", "ETREAT"}
}

resource_denies contains "consent_flag_unknown" if {
	some flag in input.resource.consent
	not flag in known_consent
}

# The grant: which role permits the request, and with which obligations.
# The purposes of the three granting roles are disjoint, so at most one body
# applies; should two ever apply with different values, evaluation fails with
# a conflict error, which the engine turns into a denial.

grant := {"reason": "clinician_care_team", "obligations": []} if {
	input.purpose_of_use == "TREAT"
	input.principal.roles[_] == "clinician"
	care_relationship
}

care_relationship if {
	input.resource.patient != ""
	input.resource.patient in input.principal.patients
}

# Break-the-glass: a clinician with purpose ETREAT and an active grant for
# this very patient (the server looks the grant up in the grants store and
# passes it as input.break_glass) reads without a care relationship. The
# grant id goes into the reasons so that every audit record of such a read
# names it. Sensitive categories still need their role.
grant := {"reason": "break_glass", "obligations": []} if {
	input.purpose_of_use == "ETREAT"
	input.principal.roles[_] == "clinician"
	break_glass_covers
}

break_glass_covers if {
	is_string(input.break_glass.grant)
	input.break_glass.grant != ""
	input.resource.patient != ""
	input.break_glass.patient == input.resource.patient
}

grant := {"reason": "billing_payment", "obligations": obs} if {
	input.purpose_of_use == "HPAYMT"
	input.principal.roles[_] == "billing"
	obs := billing_obligations[input.resource.type]
}

grant := {"reason": "research_deidentified", "obligations": obs} if {
	input.purpose_of_use == "HRESCH"
	input.principal.roles[_] == "researcher"
	obs := array.concat(
		research_obligations[input.resource.type],
		[research_allow_obligation(input.resource.type)],
	)
}

# Why no grant applied, reported only when the decision is a deny.
role_purposes := {"clinician": {"TREAT", "ETREAT"}, "billing": {"HPAYMT"}, "researcher": {"HRESCH"}}

no_grant_reasons contains "break_glass_grant_required" if {
	input.purpose_of_use == "ETREAT"
	input.principal.roles[_] == "clinician"
	not break_glass_covers
}

no_grant_reasons contains "no_care_relationship" if {
	input.purpose_of_use == "TREAT"
	input.principal.roles[_] == "clinician"
	not care_relationship
}

no_grant_reasons contains "purpose_not_permitted" if {
	some role in input.principal.roles
	role_purposes[role]
	not input.purpose_of_use in role_purposes[role]
}

no_grant_reasons contains "resource_type_not_permitted" if {
	input.purpose_of_use == "HPAYMT"
	input.principal.roles[_] == "billing"
	not billing_type
}

no_grant_reasons contains "resource_type_not_permitted" if {
	input.purpose_of_use == "HRESCH"
	input.principal.roles[_] == "researcher"
	not research_type
}

no_grant_reasons contains "role_not_permitted" if {
	not any_granting_role
}

any_granting_role if {
	some role in input.principal.roles
	role_purposes[role]
}

billing_type if billing_obligations[input.resource.type]

research_type if research_obligations[input.resource.type]

# Allowed decisions about a VIP patient carry "vip_patient" so that the audit
# record flags them for review.
allow_reasons := array.concat(grant_reasons, ["vip_patient"]) if {
	input.resource.sensitivity[_] == "vip"
} else := grant_reasons

grant_reasons := [grant.reason, concat("", ["grant=", input.break_glass.grant])] if {
	grant.reason == "break_glass"
} else := [grant.reason]

resource_decision := {
	"allow": true,
	"reasons": allow_reasons,
	"obligations": grant.obligations,
} if {
	grant
	count(resource_denies) == 0
} else := {
	"allow": false,
	"reasons": deny_reasons,
	"obligations": [],
}

deny_reasons := sort(resource_denies) if {
	count(resource_denies) > 0
	grant
} else := sort(resource_denies | no_grant_reasons) if {
	count(resource_denies | no_grant_reasons) > 0
} else := ["no_matching_grant"]
