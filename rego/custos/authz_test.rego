# Unit tests for custos.authz. Run with: go test ./policy/ ./rego/
package custos.authz_test

import data.custos.authz

# --- fixtures ---------------------------------------------------------------

patient_a := "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01"

patient_b := "0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02"

clinician := {
	"sub": "dr.alice", "roles": ["clinician"], "client_id": "assistant",
	"tenant": "general-hospital", "patients": [patient_a],
}

billing := {
	"sub": "bob.billing", "roles": ["billing"], "client_id": "assistant",
	"tenant": "general-hospital", "patients": [],
}

researcher := {
	"sub": "rita.research", "roles": ["researcher"], "client_id": "assistant",
	"tenant": "general-hospital", "patients": [],
}

auditor := {
	"sub": "audrey.audit", "roles": ["auditor"], "client_id": "assistant",
	"tenant": "general-hospital", "patients": [patient_a],
}

res(typ, patient) := {
	"uri": sprintf("custos://general-hospital/%s/%s", [typ, patient]),
	"type": typ, "patient": patient, "tenant": "general-hospital",
	"sensitivity": [], "consent": [],
}

req(p, pou, action, r) := {"principal": p, "purpose_of_use": pou, "action": action, "resource": r}

decide(p, pou, r) := d if {
	d := authz.decision with input as req(p, pou, "read", r)
}

obligation_paths(d) := {o.path | some o in d.obligations}

# --- purpose of use ---------------------------------------------------------

test_missing_purpose_denied if {
	d := authz.decision with input as {"principal": clinician, "action": "read", "resource": res("observation", patient_a)}
	not d.allow
	"purpose_of_use_missing" in d.reasons
}

test_empty_purpose_denied if {
	d := decide(clinician, "", res("observation", patient_a))
	not d.allow
	"purpose_of_use_missing" in d.reasons
}

test_unknown_purpose_denied if {
	d := decide(clinician, "CURIOSITY", res("observation", patient_a))
	not d.allow
	"purpose_of_use_unknown" in d.reasons
}

test_unknown_action_denied if {
	d := authz.decision with input as req(clinician, "TREAT", "delete", res("observation", patient_a))
	not d.allow
	d.reasons == ["action_unknown"]
}

# --- templates --------------------------------------------------------------

test_templates_allowed_any_role if {
	every p in [clinician, billing, researcher, auditor] {
		d := authz.decision with input as {"principal": p, "purpose_of_use": "HOPERAT", "action": "templates"}
		d.allow
		d.obligations == []
	}
}

test_templates_need_purpose if {
	d := authz.decision with input as {"principal": clinician, "action": "templates"}
	not d.allow
	"purpose_of_use_missing" in d.reasons
}

test_templates_need_sub if {
	d := authz.decision with input as {"principal": object.union(clinician, {"sub": ""}), "purpose_of_use": "TREAT", "action": "templates"}
	not d.allow
	"subject_missing" in d.reasons
}

# --- list and read share one rule set -------------------------------------

test_list_equals_read if {
	every p in [clinician, billing, researcher, auditor] {
		every pou in ["TREAT", "HPAYMT", "HRESCH", "ETREAT"] {
			every typ in ["patient", "observation", "coverage", "note", "encounter"] {
				every pat in [patient_a, patient_b] {
					l := authz.decision with input as req(p, pou, "list", res(typ, pat))
					r := authz.decision with input as req(p, pou, "read", res(typ, pat))
					l == r
				}
			}
		}
	}
}

test_read_without_resource_denied if {
	d := authz.decision with input as {"principal": clinician, "purpose_of_use": "TREAT", "action": "read"}
	not d.allow
	"resource_missing" in d.reasons
}

test_resource_without_fields_denied if {
	d := decide(clinician, "TREAT", {"tenant": "general-hospital", "patient": patient_a})
	not d.allow
	"resource_type_unknown" in d.reasons
}

test_principal_without_roles_denied if {
	p := object.remove(clinician, ["roles"])
	r := object.union(res("condition", patient_a), {"sensitivity": ["hiv"]})
	d := decide(p, "TREAT", r)
	not d.allow
	"sensitive_category_requires_role" in d.reasons
	"role_not_permitted" in d.reasons
}

test_resource_without_tenant_denied if {
	d := decide(clinician, "TREAT", object.remove(res("observation", patient_a), ["tenant"]))
	not d.allow
	"tenant_mismatch" in d.reasons
}

test_numeric_purpose_unknown if {
	d := decide(clinician, 7, res("observation", patient_a))
	not d.allow
	"purpose_of_use_unknown" in d.reasons
}

# --- clinician --------------------------------------------------------------

test_clinician_care_team_allowed if {
	every typ in ["patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "note", "report", "image"] {
		d := decide(clinician, "TREAT", res(typ, patient_a))
		d.allow
		d.reasons == ["clinician_care_team"]
		d.obligations == []
	}
}

test_clinician_without_care_relationship_denied if {
	d := decide(clinician, "TREAT", res("observation", patient_b))
	not d.allow
	"no_care_relationship" in d.reasons
}

test_clinician_wrong_purpose_denied if {
	d := decide(clinician, "HMARKT", res("observation", patient_a))
	not d.allow
	"purpose_not_permitted" in d.reasons
}

test_clinician_unknown_type_denied if {
	d := decide(clinician, "TREAT", res("genome", patient_a))
	not d.allow
	"resource_type_unknown" in d.reasons
}

# An empty patient never matches an empty entry of the care team; a
# clinical type without a patient is not reference data either.
test_empty_patient_is_no_care_relationship if {
	p := object.union(clinician, {"patients": ["", patient_a]})
	d := decide(p, "TREAT", object.union(res("observation", patient_a), {"patient": ""}))
	not d.allow
	"reference_type_not_permitted" in d.reasons
	d2 := decide(p, "TREAT", res("observation", patient_a))
	d2.allow
}

# --- tenant -----------------------------------------------------------------

test_tenant_mismatch_denied if {
	r := object.union(res("observation", patient_a), {"tenant": "other-hospital"})
	d := decide(clinician, "TREAT", r)
	not d.allow
	"tenant_mismatch" in d.reasons
}

test_empty_tenant_denied if {
	p := object.union(clinician, {"tenant": ""})
	r := object.union(res("observation", patient_a), {"tenant": ""})
	d := decide(p, "TREAT", r)
	not d.allow
	"tenant_mismatch" in d.reasons
}

# --- billing ----------------------------------------------------------------

test_billing_coverage_minimized if {
	d := decide(billing, "HPAYMT", res("coverage", patient_b))
	d.allow
	d.reasons == ["billing_payment"]
	{"op": "mask", "path": "/subscriberId", "fn": "last4"} in d.obligations
	{"op": "mask", "path": "/class/*/value", "fn": "last4"} in d.obligations
	obligation_paths(d) == {"/subscriberId", "/class/*/value", "/identifier", "/beneficiary/display", "/text", "/class/*/name", "/network", ""}
	{"op": "scrub", "path": "/class/*/name"} in d.obligations
	{"op": "scrub", "path": "/network"} in d.obligations
	kept := billing_allowed(d)
	every e in ["/id", "/subscriberId", "/beneficiary/type", "/beneficiary/reference", "/subscriber/reference",
		"/policyHolder/reference", "/payor/*/reference", "/class/*/value", "/class/*/name", "/period",
		"/type/coding/*/code", "/type/coding/*/system", "/relationship/coding/*/code", "/class/*/type/coding/*/code",
		"/costToBeneficiary/*/type/coding/*/code", "/costToBeneficiary/*/valueMoney"] {
		e in kept
	}
	every e in ["/identifier", "/text", "/contained", "/extension", "/beneficiary", "/beneficiary/identifier",
		"/beneficiary/display", "/subscriber", "/subscriber/display", "/subscriber/identifier",
		"/policyHolder/display", "/policyHolder/identifier", "/payor/*/identifier", "/payor/*/display", "/meta",
		"/type", "/type/text", "/type/coding/*/display", "/relationship", "/relationship/text",
		"/class/*/type", "/class/*/type/text", "/costToBeneficiary/*/type/text", "/costToBeneficiary/*/exception/*/type/text"] {
		not e in kept
	}
}

test_billing_encounter_minimized if {
	d := decide(billing, "HPAYMT", res("encounter", patient_b))
	d.allow
	obligation_paths(d) == {"/subject/display", "/identifier", "/text", "/participant/*/individual/display", "/serviceProvider/display", ""}
	kept := billing_allowed(d)
	every e in ["/id", "/subject/type", "/subject/reference", "/participant/*/individual/reference", "/period", "/class/code", "/class/system", "/type/*/coding/*/code",
		"/reasonCode/*/coding/*/code", "/priority/coding/*/code", "/hospitalization/dischargeDisposition/coding/*/code",
		"/serviceProvider/display"] {
		e in kept
	}
	every e in ["/identifier", "/text", "/contained", "/extension", "/subject", "/subject/identifier",
		"/account/*/reference", "/participant/*/individual/display", "/participant/*/individual/identifier", "/hospitalization",
		"/hospitalization/preAdmissionIdentifier", "/location/*/location/display", "/meta",
		"/class", "/class/display", "/classHistory", "/statusHistory", "/type", "/type/*/text", "/type/*/coding/*/display",
		"/reasonCode", "/reasonCode/*/text", "/serviceType", "/serviceType/text", "/priority/text",
		"/hospitalization/dietPreference", "/hospitalization/specialCourtesy", "/hospitalization/specialArrangement",
		"/hospitalization/admitSource/text", "/participant/*/type/*/text", "/location/*/physicalType/text", "/diagnosis/*/use/text"] {
		not e in kept
	}
}

# The elements a decision's one allow obligation (the last but the
# pseudonymize obligation, which renames the ids it kept) keeps.
billing_allowed(d) := kept if {
	allows := [o | some o in d.obligations; o.op == "allow"]
	count(allows) == 1
	d.obligations[count(d.obligations) - 1] == {"op": "pseudonymize", "path": "", "fn": "keyedid"}
	d.obligations[count(d.obligations) - 2] == allows[0]
	allows[0].path == ""
	kept := {e | some e in split(allows[0].fn, ",")}
}

# Claims and remittances (h-biller4): each decision masks the identifiers
# to their last four characters and ends in the allow-list of what a claim
# or remittance carries; references keep reference and type (renamed by
# the keyed ids of the resources' URIs, pseudonymize: source ids), codes their
# system, version and code; free text, narrative, attachments, addresses
# and what R4 does not define are left out.
test_billing_claims_minimized if {
	every typ in ["claim", "claimresponse", "explanationofbenefit"] {
		d := decide(billing, "HPAYMT", res(typ, patient_b))
		d.allow
		d.reasons == ["billing_payment"]
		{"op": "mask", "path": "/identifier/*/value", "fn": "last4"} in d.obligations
		every o in d.obligations {
			o.op in {"mask", "allow", "pseudonymize"}
		}
		kept := billing_allowed(d)
		every e in [
			"/status", "/use", "/created", "/patient/type", "/insurer/reference", "/identifier/*/value",
			"/type/coding/*/code", "/subType/coding/*/system", "/insurance/*/focal", "/insurance/*/coverage/type",
			"/id", "/patient/reference", "/insurance/*/coverage/reference",
		] {
			e in kept
		}
		every e in [
			"/text", "/contained", "/extension", "/identifier", "/identifier/*/assigner", "/patient", "/patient/display",
			"/patient/identifier", "/insurer/display", "/type/text", "/type/coding/*/display", "/disposition",
			"/processNote", "/form", "/insurance/*/coverage/display", "/insurance/*/businessArrangement", "/item",
		] {
			not e in kept
		}
	}
	every typ in ["claim", "explanationofbenefit"] {
		kept := billing_allowed(decide(billing, "HPAYMT", res(typ, patient_b)))
		{"op": "mask", "path": "/supportingInfo/*/valueString", "fn": "last4"} in decide(billing, "HPAYMT", res(typ, patient_b)).obligations
		every e in [
			"/billablePeriod", "/provider/reference", "/priority/coding/*/code", "/diagnosis/*/sequence",
			"/diagnosis/*/diagnosisCodeableConcept/coding/*/code", "/procedure/*/procedureCodeableConcept/coding/*/code",
			"/procedure/*/date", "/item/*/sequence", "/item/*/productOrService/coding/*/code", "/item/*/modifier/*/coding/*/code",
			"/item/*/revenue/coding/*/code", "/item/*/servicedDate", "/item/*/servicedPeriod", "/item/*/quantity",
			"/item/*/unitPrice", "/item/*/net", "/item/*/detail/*/net", "/item/*/detail/*/subDetail/*/productOrService/coding/*/code",
			"/careTeam/*/provider/reference", "/supportingInfo/*/category/coding/*/code", "/supportingInfo/*/valueString",
			"/supportingInfo/*/timingDate",
		] {
			e in kept
		}
		every e in [
			"/careTeam/*/provider/display", "/payee/party/display", "/supportingInfo/*/valueAttachment",
			"/accident/locationAddress", "/item/*/locationAddress", "/related/*/reference", "/diagnosis/*/diagnosisCodeableConcept/text",
			"/enterer/display", "/enterer/identifier", "/facility/identifier",
		] {
			not e in kept
		}
	}
	every typ in ["claimresponse", "explanationofbenefit"] {
		d := decide(billing, "HPAYMT", res(typ, patient_b))
		{"op": "mask", "path": "/payment/identifier/value", "fn": "last4"} in d.obligations
		kept := billing_allowed(d)
		every e in [
			"/outcome", "/item/*/adjudication/*/amount", "/item/*/adjudication/*/category/coding/*/code",
			"/item/*/adjudication/*/reason/coding/*/code", "/total/*/amount", "/payment/amount", "/payment/date",
			"/payment/identifier/value", "/addItem/*/productOrService/coding/*/code",
		] {
			e in kept
		}
		every e in ["/item/*/adjudication/*/reason/text", "/processNote/*/text", "/payment/identifier/assigner"] {
			not e in kept
		}
	}
	"/benefitBalance/*/financial/*/usedMoney" in billing_allowed(decide(billing, "HPAYMT", res("explanationofbenefit", patient_b)))
	not "/benefitBalance/*/description" in billing_allowed(decide(billing, "HPAYMT", res("explanationofbenefit", patient_b)))
	"/total" in billing_allowed(decide(billing, "HPAYMT", res("claim", patient_b)))
}

# Account, ChargeItem and Invoice stay denied to billing (docs/policy.md):
# claims and remittances carry every charge a biller works on, and these
# three name the patient and a guarantor in free text and references
# (Account.name, Account.guarantor.party) with no claim standard to say
# which of their elements payment needs.
test_billing_other_types_denied if {
	every typ in [
		"note", "observation", "condition", "patient", "report", "image", "medicationrequest",
		"account", "chargeitem", "invoice", "paymentnotice", "paymentreconciliation",
	] {
		d := decide(billing, "HPAYMT", res(typ, patient_b))
		not d.allow
		"resource_type_not_permitted" in d.reasons
	}
}

test_billing_wrong_purpose_denied if {
	d := decide(billing, "TREAT", res("coverage", patient_b))
	not d.allow
	"purpose_not_permitted" in d.reasons
}

# --- researcher -------------------------------------------------------------

# Every FHIR type a researcher reads carries exactly the Safe Harbor walk
# (package minimize: deidentify:safeharbor), and nothing else.
test_researcher_every_fhir_type_deidentified if {
	every typ in research_types {
		d := decide(researcher, "HRESCH", res(typ, patient_b))
		d.allow
		d.reasons == ["research_deidentified"]
		{"op": "deidentify", "path": "", "fn": "safeharbor"} in d.obligations
	}
}

test_researcher_non_fhir_denied if {
	every typ in ["note", "report", "image"] {
		d := decide(researcher, "HRESCH", res(typ, patient_b))
		not d.allow
		"resource_type_not_permitted" in d.reasons
	}
}

# Safe Harbor profile (HRESCH) --------------------------------------------

research_types := ["patient", "observation", "condition", "medicationrequest", "encounter", "coverage"]

test_research_type_without_obligations_denied if {
	d := decide(researcher, "HRESCH", res("observation", patient_b)) with authz.research_obligations as object.remove(authz.research_obligations, ["observation"])
	not d.allow
	d.obligations == []
}

# Every obligation the default policy can emit is in the vocabulary of
# package minimize, with only the keys op, path, fn.
test_obligations_in_vocabulary if {
	every p in [clinician, billing, researcher] {
		every pou in ["TREAT", "HPAYMT", "HRESCH"] {
			every typ in [
				"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "note", "report", "image",
				"claim", "claimresponse", "explanationofbenefit",
			] {
				d := decide(p, pou, res(typ, patient_a))
				every o in d.obligations {
					o.op in {"remove", "mask", "generalize", "scrub", "allow", "deidentify", "pseudonymize"}
					is_string(o.path)
					every k, _ in o {
						k in {"op", "path", "fn"}
					}
				}
			}
		}
	}
}

test_researcher_wrong_purpose_denied if {
	d := decide(researcher, "TREAT", res("observation", patient_b))
	not d.allow
	"purpose_not_permitted" in d.reasons
}

# --- auditor and unknown roles ---------------------------------------------

test_auditor_never_reads_phi if {
	every pou in ["TREAT", "HOPERAT", "HPAYMT", "HRESCH"] {
		every action in ["list", "read"] {
			d := authz.decision with input as req(auditor, pou, action, res("observation", patient_a))
			not d.allow
			"auditor_no_phi_access" in d.reasons
		}
	}
}

test_auditor_with_clinician_role_still_denied if {
	p := object.union(auditor, {"roles": ["auditor", "clinician"]})
	d := decide(p, "TREAT", res("observation", patient_a))
	not d.allow
	"auditor_no_phi_access" in d.reasons
}

test_unknown_role_denied if {
	p := object.union(clinician, {"roles": ["janitor"]})
	d := decide(p, "TREAT", res("observation", patient_a))
	not d.allow
	"role_not_permitted" in d.reasons
}

test_no_roles_denied if {
	p := object.union(clinician, {"roles": []})
	d := decide(p, "TREAT", res("observation", patient_a))
	not d.allow
	"role_not_permitted" in d.reasons
}

# --- sensitivity ------------------------------------------------------------

test_hiv_requires_role if {
	r := object.union(res("condition", patient_a), {"sensitivity": ["hiv"]})
	d := decide(clinician, "TREAT", r)
	not d.allow
	"sensitive_category_requires_role" in d.reasons
}

test_hiv_with_role_allowed if {
	r := object.union(res("condition", patient_a), {"sensitivity": ["hiv"]})
	p := object.union(clinician, {"roles": ["clinician", "sensitive:hiv"]})
	d := decide(p, "TREAT", r)
	d.allow
}

test_sensitive_role_alone_not_enough if {
	r := object.union(res("condition", patient_a), {"sensitivity": ["hiv"]})
	p := object.union(clinician, {"roles": ["sensitive:hiv"]})
	d := decide(p, "TREAT", r)
	not d.allow
	"role_not_permitted" in d.reasons
}

test_sud_requires_role if {
	r := object.union(res("note", patient_a), {"sensitivity": ["sud"]})
	d := decide(clinician, "TREAT", r)
	not d.allow
	"sensitive_category_requires_role" in d.reasons
	p := object.union(clinician, {"roles": ["clinician", "sensitive:sud"]})
	d2 := decide(p, "TREAT", r)
	d2.allow
}

test_hiv_role_does_not_unlock_sud if {
	r := object.union(res("note", patient_a), {"sensitivity": ["hiv", "sud"]})
	p := object.union(clinician, {"roles": ["clinician", "sensitive:hiv"]})
	d := decide(p, "TREAT", r)
	not d.allow
}

test_researcher_hiv_requires_role if {
	r := object.union(res("condition", patient_b), {"sensitivity": ["hiv"]})
	d := decide(researcher, "HRESCH", r)
	not d.allow
	"sensitive_category_requires_role" in d.reasons
	p := object.union(researcher, {"roles": ["researcher", "sensitive:hiv"]})
	d2 := decide(p, "HRESCH", r)
	d2.allow
	count(d2.obligations) > 0
}

test_vip_flagged if {
	r := object.union(res("observation", patient_a), {"sensitivity": ["vip"]})
	d := decide(clinician, "TREAT", r)
	d.allow
	"vip_patient" in d.reasons
	"clinician_care_team" in d.reasons
}

test_vip_not_flagged_on_deny if {
	r := object.union(res("observation", patient_b), {"sensitivity": ["vip"]})
	d := decide(clinician, "TREAT", r)
	not d.allow
	not "vip_patient" in d.reasons
}

test_unknown_sensitivity_denied if {
	r := object.union(res("observation", patient_a), {"sensitivity": ["genetic"]})
	d := decide(clinician, "TREAT", r)
	not d.allow
	"sensitivity_label_unknown" in d.reasons
}

# --- consent ----------------------------------------------------------------

test_opt_out_treatment_allowed if {
	r := object.union(res("observation", patient_a), {"consent": ["opt-out"]})
	d := decide(clinician, "TREAT", r)
	d.allow
}

test_opt_out_research_denied if {
	r := object.union(res("observation", patient_b), {"consent": ["opt-out"]})
	d := decide(researcher, "HRESCH", r)
	not d.allow
	"patient_opted_out" in d.reasons
}

test_opt_out_billing_denied if {
	r := object.union(res("coverage", patient_b), {"consent": ["opt-out"]})
	d := decide(billing, "HPAYMT", r)
	not d.allow
	"patient_opted_out" in d.reasons
}

test_unknown_consent_denied if {
	r := object.union(res("observation", patient_a), {"consent": ["share-with-everyone"]})
	d := decide(clinician, "TREAT", r)
	not d.allow
	"consent_flag_unknown" in d.reasons
}

# --- shape ------------------------------------------------------------------

test_every_decision_well_formed if {
	every p in [clinician, billing, researcher, auditor] {
		every pou in ["TREAT", "HPAYMT", "HRESCH", "PUBHLTH"] {
			every typ in ["patient", "coverage", "note", "image"] {
				well_formed(decide(p, pou, res(typ, patient_b)))
			}
		}
	}
}

well_formed(d) if {
	d.allow == true
	count(d.reasons) > 0
	every o in d.obligations {
		is_string(o.op)
		is_string(o.path)
	}
}

well_formed(d) if {
	d.allow == false
	count(d.reasons) > 0
	d.obligations == []
}

# --- break-the-glass ----------------------------------------------------------

btg_req(p, r, grant) := object.union(req(p, "ETREAT", "read", r), {"break_glass": grant})

test_break_glass_requires_a_grant if {
	d := decide(clinician, "ETREAT", res("observation", patient_b))
	not d.allow
	"break_glass_grant_required" in d.reasons
	not "purpose_not_permitted" in d.reasons
}

test_break_glass_grant_allows_the_patient_and_names_the_grant if {
	d := authz.decision with input as btg_req(clinician, res("note", patient_b), {"grant": "g-1", "patient": patient_b})
	d.allow
	d.reasons == ["break_glass", "grant=g-1"]
	d.obligations == []
}

test_break_glass_grant_covers_only_its_patient if {
	d := authz.decision with input as btg_req(clinician, res("note", patient_a), {"grant": "g-1", "patient": patient_b})
	not d.allow
	"break_glass_grant_required" in d.reasons
}

test_break_glass_needs_the_clinician_role if {
	d := authz.decision with input as btg_req(billing, res("note", patient_b), {"grant": "g-1", "patient": patient_b})
	not d.allow
}

test_break_glass_empty_grant_id_is_no_grant if {
	d := authz.decision with input as btg_req(clinician, res("note", patient_b), {"grant": "", "patient": patient_b})
	not d.allow
}

test_break_glass_overrides_opt_out_but_not_sensitive_categories if {
	optout := object.union(res("observation", patient_b), {"consent": ["opt-out"]})
	d1 := authz.decision with input as btg_req(clinician, optout, {"grant": "g-1", "patient": patient_b})
	d1.allow
	hiv := object.union(res("observation", patient_b), {"sensitivity": ["hiv"]})
	d2 := authz.decision with input as btg_req(clinician, hiv, {"grant": "g-1", "patient": patient_b})
	not d2.allow
	"sensitive_category_requires_role" in d2.reasons
}

test_break_glass_vip_is_flagged if {
	vip := object.union(res("patient", patient_b), {"sensitivity": ["vip"]})
	d := authz.decision with input as btg_req(clinician, vip, {"grant": "g-1", "patient": patient_b})
	d.allow
	d.reasons == ["break_glass", "grant=g-1", "vip_patient"]
}

# --- batch decisions (list pages) ---------------------------------------------

# A varied page: care-team and other patients, every kind of type, labels,
# consent flags, a foreign tenant, and break-the-glass grants that cover the
# item, cover another patient, or have no id.
batch_items := [
	{"resource": res("observation", patient_a), "break_glass": null},
	{"resource": res("observation", patient_b), "break_glass": null},
	{"resource": res("patient", patient_a), "break_glass": null},
	{"resource": res("patient", patient_b), "break_glass": {"grant": "g-1", "patient": patient_b}},
	{"resource": res("coverage", patient_b), "break_glass": null},
	{"resource": res("encounter", patient_a), "break_glass": null},
	{"resource": res("note", patient_b), "break_glass": {"grant": "g-2", "patient": patient_b}},
	{"resource": res("image", patient_a), "break_glass": {"grant": "g-3", "patient": patient_b}},
	{"resource": res("report", patient_b), "break_glass": {"grant": "", "patient": patient_b}},
	{"resource": res("genome", patient_a), "break_glass": null},
	{"resource": object.union(res("condition", patient_a), {"sensitivity": ["hiv"]}), "break_glass": null},
	{"resource": object.union(res("condition", patient_b), {"sensitivity": ["sud", "vip"]}), "break_glass": {"grant": "g-4", "patient": patient_b}},
	{"resource": object.union(res("observation", patient_a), {"sensitivity": ["vip"]}), "break_glass": null},
	{"resource": object.union(res("observation", patient_a), {"sensitivity": ["genetic"]}), "break_glass": null},
	{"resource": object.union(res("medicationrequest", patient_a), {"consent": ["opt-out"]}), "break_glass": null},
	{"resource": object.union(res("medicationrequest", patient_b), {"consent": ["opt-out"]}), "break_glass": {"grant": "g-5", "patient": patient_b}},
	{"resource": object.union(res("coverage", patient_a), {"consent": ["share-with-everyone"]}), "break_glass": null},
	{"resource": object.union(res("encounter", patient_a), {"tenant": "other-hospital"}), "break_glass": null},
	{"resource": object.union(res("observation", patient_a), {"patient": ""}), "break_glass": null},
	{"resource": res("observation", patient_a), "break_glass": null}, # a repeat: same decision twice
	{"resource": res("procedure", patient_a), "break_glass": null},
	{"resource": res("attachment", patient_b), "break_glass": {"grant": "g-6", "patient": patient_b}},
	{"resource": ref_res("organization"), "break_glass": null},
	{"resource": ref_res("group"), "break_glass": null},
	{"resource": object.union(res("observation", patient_a), {"sensitivity": ["restricted"]}), "break_glass": null},
	{"resource": object.union(res("condition", patient_a), {"sensitivity": ["eth", "psy"]}), "break_glass": null},
]

# The decision about one item alone, through the single-resource entry point.
single_decision(p, pou, item) := d if {
	item.break_glass == null
	d := authz.decision with input as req(p, pou, "read", item.resource)
} else := d if {
	d := authz.decision with input as object.union(req(p, pou, "read", item.resource), {"break_glass": item.break_glass})
}

batch_principals := [
	clinician, billing, researcher, auditor,
	object.union(clinician, {"roles": ["clinician", "sensitive:hiv", "sensitive:sud"]}),
	object.union(researcher, {"roles": ["researcher", "sensitive:hiv"], "patients": [patient_a]}),
	object.union(clinician, {"tenant": ""}),
	object.union(clinician, {"patients": ["", patient_a]}),
	object.union(billing, {"roles": ["billing", "clinician"]}),
]

# decisions[i] is exactly the decision the single entry point gives for
# item i, for every principal and purpose: a list page never shows what a
# read would deny, and never hides what it would allow.
test_batch_equals_single_decisions if {
	every p in batch_principals {
		every pou in ["TREAT", "ETREAT", "HPAYMT", "HRESCH", "PUBHLTH", "", "BOGUS"] {
			ds := authz.decisions with input as {"principal": p, "purpose_of_use": pou, "action": "list", "items": batch_items}
			count(ds) == count(batch_items)
			every i, item in batch_items {
				ds[i] == single_decision(p, pou, item)
			}
		}
	}
}

# The page above is not trivial: it mixes allows (with and without
# obligations) and denies for every role that can read.
test_batch_page_is_mixed if {
	every pou_p in [["TREAT", clinician], ["ETREAT", clinician], ["HPAYMT", billing], ["HRESCH", researcher]] {
		ds := authz.decisions with input as {"principal": pou_p[1], "purpose_of_use": pou_p[0], "action": "list", "items": batch_items}
		count([d | some d in ds; d.allow]) > 0
		count([d | some d in ds; not d.allow]) > 0
	}
	ds := authz.decisions with input as {"principal": researcher, "purpose_of_use": "HRESCH", "action": "list", "items": batch_items}
	count([d | some d in ds; count(d.obligations) > 0]) > 0
}

test_batch_break_glass_per_item if {
	ds := authz.decisions with input as {"principal": clinician, "purpose_of_use": "ETREAT", "action": "list", "items": batch_items}
	ds[3].reasons == ["break_glass", "grant=g-1"]
	ds[6].reasons == ["break_glass", "grant=g-2"]
	not ds[7].allow # the grant names another patient
	not ds[8].allow # a grant without id
	not ds[1].allow # no grant
}

test_batch_read_equals_list if {
	l := authz.decisions with input as {"principal": researcher, "purpose_of_use": "HRESCH", "action": "list", "items": batch_items}
	r := authz.decisions with input as {"principal": researcher, "purpose_of_use": "HRESCH", "action": "read", "items": batch_items}
	l == r
}

test_batch_empty_page if {
	ds := authz.decisions with input as {"principal": clinician, "purpose_of_use": "TREAT", "action": "list", "items": []}
	ds == []
}

test_batch_not_for_templates if {
	not authz.decisions with input as {"principal": clinician, "purpose_of_use": "TREAT", "action": "templates", "items": batch_items}
}

# --- any FHIR R4 type, attachments, reference data (issue 14) ------------------

# A tenant-level resource: labels.patient is "".
ref_res(typ) := res(typ, "")

test_any_r4_type_in_the_care_team if {
	every typ in ["procedure", "documentreference", "allergyintolerance", "diagnosticreport", "immunization"] {
		decide(clinician, "TREAT", res(typ, patient_a)).allow
		not decide(clinician, "TREAT", res(typ, patient_b)).allow
	}
}

test_unknown_types_denied if {
	every typ in ["widget", "Observation", "domainresource", "resource", ""] {
		d := decide(clinician, "TREAT", res(typ, patient_a))
		not d.allow
		"resource_type_unknown" in d.reasons
	}
}

test_every_r4_type_is_known if {
	count(authz.fhir_r4_types) == 147
	every typ in ["patient", "observation", "binary", "organization", "documentreference", "medicationknowledge"] {
		authz.known_type(typ)
	}
}

# An attachment is read like a note: clinicians of the care team, or with a
# break-the-glass grant; not billing, not research.
test_attachment_like_a_note if {
	decide(clinician, "TREAT", res("attachment", patient_a)).allow
	not decide(clinician, "TREAT", res("attachment", patient_b)).allow
	bg := authz.decision with input as object.union(req(clinician, "ETREAT", "read", res("attachment", patient_b)), {"break_glass": {"grant": "g-9", "patient": patient_b}})
	bg.allow
	d := decide(billing, "HPAYMT", res("attachment", patient_a))
	not d.allow
	"resource_type_not_permitted" in d.reasons
	r := decide(researcher, "HRESCH", res("attachment", patient_a))
	not r.allow
	"resource_type_not_permitted" in r.reasons
}

test_reference_data_for_treatment_and_billing if {
	every typ in ["organization", "practitioner", "location", "medication"] {
		d := decide(clinician, "TREAT", ref_res(typ))
		d.allow
		d.reasons == ["reference_data"]
		d.obligations == []
		decide(clinician, "ETREAT", ref_res(typ)).allow # no grant needed: no patient
		decide(billing, "HPAYMT", ref_res(typ)).allow
	}
}

test_reference_data_for_research_is_deidentified if {
	d := decide(researcher, "HRESCH", ref_res("practitioner"))
	d.allow
	{"op": "deidentify", "path": "", "fn": "safeharbor"} in d.obligations
}

test_reference_data_denied_otherwise if {
	# other tenant, auditor, unknown purpose, a role without a grant
	not decide(clinician, "TREAT", object.union(ref_res("organization"), {"tenant": "other-hospital"})).allow
	"auditor_no_phi_access" in decide(auditor, "TREAT", ref_res("organization")).reasons
	not decide(clinician, "HMARKT", ref_res("organization")).allow
	not decide(object.union(clinician, {"roles": ["nurse"]}), "TREAT", ref_res("organization")).allow
}

# A tenant-level Location that is a patient's home (label residence, set at
# import: docs/import.md, "A patient's home") is not reference data: its
# address is a patient's, and the decision cannot check a care
# relationship, an opt-out or a VIP label for a patient it does not know.
# Denied to every role and purpose, break-the-glass and research included;
# until h-biller3 every biller and clinician of the tenant read it.
test_patient_residence_is_not_reference_data if {
	home := object.union(ref_res("location"), {"sensitivity": ["residence"]})
	every pp in [["TREAT", clinician], ["ETREAT", clinician], ["HPAYMT", billing], ["HRESCH", researcher]] {
		d := decide(pp[1], pp[0], home)
		not d.allow
		d.reasons == ["patient_residence_not_reference_data"]
	}
	bg := authz.decision with input as btg_req(clinician, home, {"grant": "g-1", "patient": patient_a})
	not bg.allow

	# the same page decides it the same way, beside reference data it allows
	ds := authz.decisions with input as {"principal": billing, "purpose_of_use": "HPAYMT", "action": "list", "items": [
		{"resource": ref_res("location"), "break_glass": null},
		{"resource": home, "break_glass": null},
	]}
	ds[0].allow
	not ds[1].allow
}

# In a patient's compartment the label changes nothing: the role grants
# decide, as for any of the patient's resources.
test_patient_residence_in_its_compartment if {
	home := labeled("location", ["residence"])
	d := decide(clinician, "TREAT", home)
	d.allow
	d.reasons == ["clinician_care_team"]
	not decide(clinician, "TREAT", object.union(home, {"patient": patient_b})).allow
	not decide(billing, "HPAYMT", home).allow
}

# Types outside the reference list without a patient are denied to everyone:
# a Group names patients; an attachment or a clinical type without a
# patient is not reference data.
test_tenant_level_non_reference_denied if {
	every typ in ["group", "attachment", "observation", "list", "note"] {
		every pp in [["TREAT", clinician], ["HPAYMT", billing], ["HRESCH", researcher]] {
			d := decide(pp[1], pp[0], ref_res(typ))
			not d.allow
		}
		"reference_type_not_permitted" in decide(clinician, "TREAT", ref_res(typ)).reasons
	}
}

test_research_reads_more_structured_types if {
	every typ in ["procedure", "allergyintolerance", "immunization", "careplan"] {
		d := decide(researcher, "HRESCH", res(typ, patient_a))
		d.allow
		d.obligations == [{"op": "deidentify", "path": "", "fn": "safeharbor"}]
	}
	every typ in ["documentreference", "diagnosticreport", "media", "binary", "communication", "note", "attachment"] {
		not decide(researcher, "HRESCH", res(typ, patient_a)).allow
	}
}

# --- sensitivity labels from meta.security (issue 14) --------------------------

labeled(typ, labels) := object.union(res(typ, patient_a), {"sensitivity": labels})

test_sensitivity_labels_need_their_role if {
	every lr in [["eth", "sensitive:sud"], ["psy", "sensitive:psy"], ["sdv", "sensitive:sdv"], ["std", "sensitive:std"], ["sex", "sensitive:sex"]] {
		d := decide(clinician, "TREAT", labeled("condition", [lr[0]]))
		not d.allow
		"sensitive_category_requires_role" in d.reasons
		decide(object.union(clinician, {"roles": ["clinician", lr[1]]}), "TREAT", labeled("condition", [lr[0]])).allow
	}
}

test_restricted_is_treatment_only if {
	decide(clinician, "TREAT", labeled("observation", ["restricted"])).allow
	bg := authz.decision with input as object.union(req(clinician, "ETREAT", "read", labeled("observation", ["restricted"])), {"break_glass": {"grant": "g-9", "patient": patient_a}})
	bg.allow
	b := decide(billing, "HPAYMT", labeled("coverage", ["restricted"]))
	not b.allow
	"restricted_use_only_treatment" in b.reasons
	r := decide(researcher, "HRESCH", labeled("observation", ["restricted"]))
	not r.allow
	"restricted_use_only_treatment" in r.reasons
}

test_very_restricted_needs_role_and_treatment if {
	d := decide(clinician, "TREAT", labeled("observation", ["very-restricted"]))
	not d.allow
	"sensitive_category_requires_role" in d.reasons
	vr := object.union(clinician, {"roles": ["clinician", "sensitive:very-restricted"]})
	decide(vr, "TREAT", labeled("observation", ["very-restricted"])).allow
	vb := object.union(billing, {"roles": ["billing", "sensitive:very-restricted"]})
	b := decide(vb, "HPAYMT", labeled("coverage", ["very-restricted"]))
	not b.allow
	"restricted_use_only_treatment" in b.reasons
}

# Outside treatment and without the role, very-restricted denies for both
# reasons, and a list page that holds such a resource decides its other
# items (one conflicting label once failed the whole page).
test_very_restricted_outside_treatment_without_role if {
	every c in [[researcher, "HRESCH", "observation"], [billing, "HPAYMT", "coverage"]] {
		d := decide(c[0], c[1], labeled(c[2], ["very-restricted"]))
		not d.allow
		d.reasons == ["restricted_use_only_treatment", "sensitive_category_requires_role"]
		items := [
			{"resource": res(c[2], patient_a), "break_glass": null},
			{"resource": labeled(c[2], ["very-restricted"]), "break_glass": null},
		]
		ds := authz.decisions with input as {"principal": c[0], "purpose_of_use": c[1], "action": "list", "items": items}
		ds[0].allow
		ds[1] == d
	}
}

test_unknown_label_still_denied if {
	d := decide(clinician, "TREAT", labeled("observation", ["n"]))
	not d.allow
	"sensitivity_label_unknown" in d.reasons
}

# --- nothing visible --------------------------------------------------------

nothing_visible(p, pou) := v if {
	v := authz.nothing_visible with input as {"principal": p, "purpose_of_use": pou, "action": "list"}
}

tenant_level(typ) := object.union(res(typ, patient_a), {"patient": "", "uri": sprintf("custos://general-hospital/%s/x", [typ])})

# A sample of resources covering every grant: care team and not, reference
# data, billing and research types, documents; each with and without a
# break-the-glass grant for its patient.
nv_items := [{"resource": r, "break_glass": bg} |
	some r in [
		res("observation", patient_a), res("observation", patient_b), res("coverage", patient_b),
		res("patient", patient_b), res("note", patient_a), tenant_level("organization"),
		tenant_level("medication"),
	]
	some bg in [null, {"grant": "g-1", "patient": r.patient}]
]

# Callers who can see nothing, and callers who can see something.
nv_blind := [
	[auditor, "HOPERAT"], [auditor, "TREAT"],
	[object.union(auditor, {"roles": ["auditor", "clinician"]}), "TREAT"],
	[object.union(clinician, {"roles": ["nurse"]}), "TREAT"],
	[clinician, "HPAYMT"], [billing, "TREAT"], [researcher, "ETREAT"],
	[object.union(clinician, {"tenant": ""}), "TREAT"],
	[clinician, ""], [clinician, "CURIOSITY"],
	[object.union(clinician, {"sub": ""}), "TREAT"],
]

nv_seeing := [
	[clinician, "TREAT"], [object.union(clinician, {"patients": []}), "TREAT"],
	[object.union(clinician, {"patients": []}), "ETREAT"],
	[billing, "HPAYMT"], [researcher, "HRESCH"],
]

test_nothing_visible_to_those_no_resource_is_allowed if {
	every c in nv_blind {
		nothing_visible(c[0], c[1]) == true
		ds := authz.decisions with input as {"principal": c[0], "purpose_of_use": c[1], "action": "list", "items": nv_items}
		count(ds) == count(nv_items)
		every d in ds {
			not d.allow
		}
	}
}

test_something_visible_to_every_grant_mode if {
	every c in nv_seeing {
		nothing_visible(c[0], c[1]) == false
		ds := authz.decisions with input as {"principal": c[0], "purpose_of_use": c[1], "action": "list", "items": nv_items}
		some d in ds
		d.allow
	}
}

# It depends on the principal and purpose only: a resource, a grant or the
# action in the input change nothing.
test_nothing_visible_reads_no_resource if {
	every c in array.concat(nv_blind, nv_seeing) {
		v := nothing_visible(c[0], c[1])
		every item in nv_items {
			every action in ["read", "list", "templates"] {
				x := {"principal": c[0], "purpose_of_use": c[1], "action": action, "resource": item.resource, "break_glass": item.break_glass}
				w := authz.nothing_visible with input as x
				w == v
			}
		}
	}
}

# --- the no-deny shortcut -----------------------------------------------------

# class_denies answers the common case (own tenant, known type, no labels,
# no consent flags) with principal_denies alone; everywhere it must agree
# with the plain resource_denies, for every principal, including the ones
# with principal denies (the auditor) and without a tenant.
shortcut_principals := [clinician, billing, researcher, auditor, object.union(clinician, {"tenant": ""})]

shortcut_tenants := ["general-hospital", "other-hospital", ""]

shortcut_types := ["observation", "note", "Observation", "no-such-type", ""]

shortcut_labels := [[], ["vip"], ["restricted"], ["very-restricted"], ["psy"], ["no-such-label"]]

shortcut_consent := [[], ["opt-out"], ["no-such-flag"]]

test_class_denies_agrees_with_resource_denies if {
	every p in shortcut_principals {
		every tenant in shortcut_tenants {
			every typ in shortcut_types {
				every sens in shortcut_labels {
					every consent in shortcut_consent {
						x := {"principal": p, "purpose_of_use": "treatment", "action": "read"}
						fast := authz.class_denies(true, typ, tenant, sens, consent) with input as x
						plain := authz.resource_denies(true, typ, tenant, sens, consent) with input as x
						fast == plain
					}
				}
			}
		}
	}
}

# The shortcut is taken at all: on the common path its answer is the
# principal's denies (empty for a clinician, the auditor's own for an
# auditor).
#
# The value is bound before it is compared: `f(...) with input as x == v`
# parses as `f(...) with input as (x == v)`, which holds for any v.
test_class_denies_shortcut_common_path if {
	x := {"principal": clinician, "purpose_of_use": "treatment", "action": "read"}
	clinician_denies := authz.class_denies(true, "observation", "general-hospital", [], []) with input as x
	clinician_denies == set()
	y := {"principal": auditor, "purpose_of_use": "treatment", "action": "read"}
	auditor_denies := authz.class_denies(true, "observation", "general-hospital", [], []) with input as y
	auditor_denies == {"auditor_no_phi_access"}
}
