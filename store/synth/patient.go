package synth

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

const (
	dateFmt     = "2006-01-02"
	dateTimeFmt = "2006-01-02T15:04:05Z"

	mimeFHIR  = "application/fhir+json"
	mimeNote  = "text/markdown"
	mimePDF   = "application/pdf"
	mimeImage = "image/png"

	systemMRN  = "urn:custos:mrn"
	systemSSN  = "http://hl7.org/fhir/sid/us-ssn"
	systemEnc  = "urn:custos:encounter"
	systemSub  = "urn:custos:member-id"
	loincSys   = "http://loinc.org"
	snomedSys  = "http://snomed.info/sct"
	icd10Sys   = "http://hl7.org/fhir/sid/icd-10-cm"
	rxnormSys  = "http://www.nlm.nih.gov/research/umls/rxnorm"
	ucumSys    = "http://unitsofmeasure.org"
	facilityNm = "General Hospital (synthetic)"
)

var audience = []string{"user", "assistant"}

// generator holds the validated options; it is read-only once built and
// safe for concurrent use by the workers.
type generator struct {
	dir  string
	opts Options
	// mrnOff and ssnOff make the per-index bijections seed dependent.
	mrnOff, ssnOff uint64
}

func newGenerator(dir string, o Options) *generator {
	s := splitmix64(uint64(o.Seed))
	return &generator{dir: dir, opts: o, mrnOff: s % 1e8, ssnOff: splitmix64(s) % 1e8}
}

// splitmix64 is the SplitMix64 finalizer, used to derive independent PCG
// streams from (seed, patient index).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rngFor returns patient #i's private random stream. Patients are
// independent, so workers may generate them in any order.
func (g *generator) rngFor(i int) *rand.Rand {
	s := uint64(g.opts.Seed)
	return rand.New(rand.NewPCG(splitmix64(s), splitmix64(s^splitmix64(uint64(i)+1))))
}

// newUUID draws 16 bytes from r and shapes them as a version 4, RFC 9562
// variant UUID.
func newUUID(r *rand.Rand) string {
	var b [16]byte
	hi, lo := r.Uint64(), r.Uint64()
	for k := 0; k < 8; k++ {
		b[k] = byte(hi >> (56 - 8*k))
		b[8+k] = byte(lo >> (56 - 8*k))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	u, err := uuid.FromBytes(b[:])
	if err != nil { // cannot happen: b has 16 bytes
		panic(err)
	}
	return u.String()
}

// person is everything identifying about one synthetic patient.
type person struct {
	id                  string
	given, family       string
	gender              string
	birth               time.Time
	age                 int
	mrn, ssn            string
	phone, email        string
	line                string
	place               place
	zip                 string
	clinician           string
	sensitivity         []string // labels on every resource (vip)
	consent             []string // labels on every resource (opt-out)
	fullName, reference string
}

type visit struct {
	id         string
	start, end time.Time
}

type obsValue struct {
	test  labTest
	value float64
	when  time.Time
}

// patient generates every resource of patient #i, writes its files and
// returns the manifest lines in their fixed order.
func (g *generator) patient(i int) patientResult {
	r := g.rngFor(i)
	now := g.opts.Now
	sh := shapeOf(i)
	p := g.person(i, r)
	res := patientResult{id: p.id, entries: make([]manifestEntry, 0, sh.resources())}

	// Visits: distinct days 3..540 days before Now, oldest first.
	days := make([]int, 0, sh.encounters)
	for len(days) < sh.encounters {
		d := 3 + r.IntN(538)
		if !slices.Contains(days, d) {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	slices.Reverse(days)
	visits := make([]visit, len(days))
	for k, d := range days {
		start := now.AddDate(0, 0, -d).Add(time.Duration(8*60+r.IntN(8*60)) * time.Minute)
		visits[k] = visit{id: newUUID(r), start: start, end: start.Add(time.Duration(20+r.IntN(41)) * time.Minute)}
	}

	// Diagnoses: the sensitive edge cases come first.
	perm := r.Perm(len(commonDiagnoses))
	diags := make([]diagnosis, 0, sh.conditions)
	var diagLabel []string
	switch i {
	case edgeHIV:
		diags = append(diags, hivDiagnosis)
		diagLabel = []string{"hiv"}
	case edgeSUD:
		diags = append(diags, sudDiagnosis)
		diagLabel = []string{"sud"}
	}
	for k := 0; len(diags) < sh.conditions; k++ {
		diags = append(diags, commonDiagnoses[perm[k]])
	}

	var err error
	add := func(e manifestEntry, data []byte) {
		if err != nil {
			return
		}
		if err = writeNew(filepath.Join(g.dir, e.File), data); err != nil {
			return
		}
		res.bytes += int64(len(data))
		res.entries = append(res.entries, e)
	}

	// Patient.
	pt := fhirPatient{
		ResourceType: "Patient",
		ID:           p.id,
		Meta:         meta{LastUpdated: visits[0].start.Format(dateTimeFmt)},
		Identifier: []identifier{
			{Use: "usual", Type: &codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/v2-0203", Code: "MR", Display: "Medical record number"}}}, System: systemMRN, Value: p.mrn},
			{Use: "official", Type: &codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/v2-0203", Code: "SS", Display: "Social Security number"}}}, System: systemSSN, Value: p.ssn},
		},
		Active:    true,
		Name:      []humanName{{Use: "official", Family: p.family, Given: []string{p.given}}},
		Telecom:   []contactPoint{{System: "phone", Value: p.phone, Use: "home"}, {System: "email", Value: p.email, Use: "home"}},
		Gender:    p.gender,
		BirthDate: p.birth.Format(dateFmt),
		Address:   []address{{Use: "home", Line: []string{p.line}, City: p.place.city, State: p.place.state, PostalCode: p.zip, Country: "US"}},
	}
	add(g.fhirEntry(p, "patient", p.id, "Patient (demographics)", "Patient demographic record", 0.8, visits[0].start, nil), mustJSON(pt))

	// Encounters.
	for _, v := range visits {
		e := fhirEncounter{
			ResourceType:    "Encounter",
			ID:              v.id,
			Meta:            meta{LastUpdated: v.end.Format(dateTimeFmt)},
			Identifier:      []identifier{{System: systemEnc, Value: fmt.Sprintf("ENC-%08d", r.IntN(1e8))}},
			Status:          "finished",
			Class:           coding{System: "http://terminology.hl7.org/CodeSystem/v3-ActCode", Code: "AMB", Display: "ambulatory"},
			Type:            []codeableConcept{{Coding: []coding{{System: snomedSys, Code: "185349003", Display: "Encounter for check up"}}, Text: "Office visit"}},
			Subject:         reference{Reference: p.reference, Display: p.fullName},
			Participant:     []participant{{Individual: reference{Display: p.clinician}}},
			Period:          period{Start: v.start.Format(dateTimeFmt), End: v.end.Format(dateTimeFmt)},
			ServiceProvider: reference{Display: facilityNm},
		}
		add(g.fhirEntry(p, "encounter", v.id, "Encounter (visit)", "Clinical encounter", 0.5, v.end, nil), mustJSON(e))
	}

	// Observations: distinct tests, spread over the visits.
	tperm := r.Perm(len(labTests))
	obs := make([]obsValue, 0, sh.observations)
	for k := 0; k < sh.observations; k++ {
		t := labTests[tperm[k]]
		v := visits[k%len(visits)]
		id := newUUID(r)
		eff := v.start.Add(15 * time.Minute)
		issued := eff.Add(time.Duration(2*60+r.IntN(24*60)) * time.Minute)
		if t.vital {
			issued = eff
		}
		val := roundTo(t.lo+r.Float64()*(t.hi-t.lo), t.decimals)
		obs = append(obs, obsValue{test: t, value: val, when: eff})
		cat, title, desc := "laboratory", "Observation (laboratory result)", "Laboratory observation"
		if t.vital {
			cat, title, desc = "vital-signs", "Observation (vital sign)", "Vital sign observation"
		}
		o := fhirObservation{
			ResourceType:      "Observation",
			ID:                id,
			Meta:              meta{LastUpdated: issued.Format(dateTimeFmt)},
			Status:            "final",
			Category:          []codeableConcept{{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/observation-category", Code: cat}}}},
			Code:              codeableConcept{Coding: []coding{{System: loincSys, Code: t.loinc, Display: t.display}}, Text: t.display},
			Subject:           reference{Reference: p.reference, Display: p.fullName},
			Encounter:         &reference{Reference: "Encounter/" + v.id},
			EffectiveDateTime: eff.Format(dateTimeFmt),
			Issued:            issued.Format(dateTimeFmt),
			Performer:         []reference{{Display: p.clinician}},
			ValueQuantity:     quantity{Value: val, Unit: t.unit, System: ucumSys, Code: t.ucum},
		}
		add(g.fhirEntry(p, "observation", id, title, desc, 0.5, issued, nil), mustJSON(o))
	}

	// Conditions.
	condIDs := make([]string, len(diags))
	for k, d := range diags {
		id := newUUID(r)
		condIDs[k] = id
		v := visits[k%len(visits)]
		onset := v.start.AddDate(0, 0, -(30 + r.IntN(3000)))
		var lab []string
		if k == 0 {
			lab = diagLabel
		}
		c := fhirCondition{
			ResourceType:       "Condition",
			ID:                 id,
			Meta:               meta{LastUpdated: v.end.Format(dateTimeFmt)},
			ClinicalStatus:     codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/condition-clinical", Code: "active"}}},
			VerificationStatus: codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/condition-ver-status", Code: "confirmed"}}},
			Category:           []codeableConcept{{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/condition-category", Code: "problem-list-item", Display: "Problem List Item"}}}},
			Code: codeableConcept{Coding: []coding{
				{System: snomedSys, Code: d.snomed, Display: d.snomedDisplay},
				{System: icd10Sys, Code: d.icd10, Display: d.icd10Display},
			}, Text: d.text},
			Subject:       reference{Reference: p.reference, Display: p.fullName},
			OnsetDateTime: onset.Format(dateFmt),
			RecordedDate:  v.end.Format(dateTimeFmt),
			Recorder:      &reference{Display: p.clinician},
		}
		add(g.fhirEntry(p, "condition", id, "Condition (problem list entry)", "Diagnosis or problem", 0.5, v.end, lab), mustJSON(c))
	}

	// MedicationRequest for the first (possibly sensitive) diagnosis.
	last := visits[len(visits)-1]
	{
		id := newUUID(r)
		d := diags[0]
		authored := last.start.Add(40 * time.Minute)
		m := fhirMedicationRequest{
			ResourceType:              "MedicationRequest",
			ID:                        id,
			Meta:                      meta{LastUpdated: authored.Format(dateTimeFmt)},
			Status:                    "active",
			Intent:                    "order",
			MedicationCodeableConcept: codeableConcept{Coding: []coding{{System: rxnormSys, Code: d.rxnorm, Display: d.medication}}, Text: d.medication},
			Subject:                   reference{Reference: p.reference, Display: p.fullName},
			AuthoredOn:                authored.Format(dateTimeFmt),
			Requester:                 reference{Display: p.clinician},
			ReasonReference:           []reference{{Reference: "Condition/" + condIDs[0]}},
			DosageInstruction:         []dosage{{Text: d.dosage}},
		}
		add(g.fhirEntry(p, "medicationrequest", id, "MedicationRequest (prescription)", "Medication order", 0.5, authored, diagLabel), mustJSON(m))
	}

	// Coverage.
	{
		id := newUUID(r)
		member := fmt.Sprintf("W%09d", r.IntN(1e9))
		start := time.Date(now.Year()-1, time.January, 1, 0, 0, 0, 0, time.UTC)
		end := time.Date(now.Year(), time.December, 31, 0, 0, 0, 0, time.UTC)
		c := fhirCoverage{
			ResourceType: "Coverage",
			ID:           id,
			Meta:         meta{LastUpdated: visits[0].start.Format(dateTimeFmt)},
			Identifier:   []identifier{{System: systemSub, Value: member}},
			Status:       "active",
			Type:         codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/v3-ActCode", Code: "HIP", Display: "health insurance plan policy"}}},
			SubscriberID: member,
			Beneficiary:  reference{Reference: p.reference, Display: p.fullName},
			Relationship: codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/subscriber-relationship", Code: "self"}}},
			Period:       period{Start: start.Format(dateFmt), End: end.Format(dateFmt)},
			Payor:        []reference{payor(g.opts.Tenant, payors[r.IntN(len(payors))])},
			Class: []coverageClass{{
				Type:  codeableConcept{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/coverage-class", Code: "group"}}},
				Value: fmt.Sprintf("GRP-%05d", r.IntN(1e5)),
			}},
		}
		add(g.fhirEntry(p, "coverage", id, "Coverage (insurance)", "Insurance coverage", 0.4, visits[0].start, nil), mustJSON(c))
	}

	// Clinical note.
	{
		id := newUUID(r)
		written := last.end.Add(2 * time.Hour)
		text := clinicalNote(p, visits, diags, obs, i)
		add(g.entry(p, "note", id, fmt.Sprintf("note://%s/patients/%s/notes/%s", g.opts.Tenant, p.id, id),
			"Note (clinical progress note)", "Free-text clinical note", mimeNote, "notes/"+id+".md", 0.6, written, diagLabel), text)
	}

	if sh.media {
		id := newUUID(r)
		when := last.end.Add(26 * time.Hour)
		add(g.entry(p, "report", id, fmt.Sprintf("report://%s/patients/%s/reports/%s", g.opts.Tenant, p.id, id),
			"Report (laboratory report)", "Laboratory report document", mimePDF, "reports/"+id+".pdf", 0.5, when, nil),
			labReportPDF(p, obs, when))

		id = newUUID(r)
		when = visits[0].start.Add(30 * time.Minute)
		add(g.entry(p, "image", id, fmt.Sprintf("image://%s/patients/%s/images/%s", g.opts.Tenant, p.id, id),
			"Image (diagnostic image)", "Diagnostic image thumbnail", mimeImage, "images/"+id+".png", 0.3, when, nil),
			diagnosticPNG(r))
	}
	if err != nil {
		return patientResult{err: err}
	}
	return res
}

// person draws the identity of patient #i.
func (g *generator) person(i int, r *rand.Rand) person {
	now := g.opts.Now
	p := person{id: newUUID(r)}
	if r.IntN(2) == 0 {
		p.gender, p.given = "female", givenFemale[r.IntN(len(givenFemale))]
	} else {
		p.gender, p.given = "male", givenMale[r.IntN(len(givenMale))]
	}
	p.family = familyNames[r.IntN(len(familyNames))]
	p.fullName = p.given + " " + p.family
	p.reference = "Patient/" + p.id

	p.age = 18 + r.IntN(68) // 18..85: nobody but the edge case is over 89
	if i == edgeAged92 {
		p.age = 92
	}
	// Subtracting fewer than 365 days from exactly age years ago keeps the
	// age at Now equal to p.age.
	p.birth = now.AddDate(-p.age, 0, -r.IntN(365))
	p.birth = time.Date(p.birth.Year(), p.birth.Month(), p.birth.Day(), 0, 0, 0, 0, time.UTC)

	p.place = places[r.IntN(len(places))]
	if i == edgeZIP3 {
		p.place = restrictedPlace
	}
	p.zip = fmt.Sprintf("%s%02d", p.place.zip3, r.IntN(100))
	p.line = fmt.Sprintf("%d %s", 1+r.IntN(9899), streets[r.IntN(len(streets))])
	if r.IntN(4) == 0 {
		p.line += fmt.Sprintf(" Apt %d", 1+r.IntN(40))
	}
	p.phone = fmt.Sprintf("(%s) 555-01%02d", p.place.areaCode, r.IntN(100))
	p.email = fmt.Sprintf("%s.%s%d@example.com", strings.ToLower(p.given), strings.ToLower(p.family), 10+r.IntN(90))

	// MRN and SSN are affine bijections of the index (multipliers coprime
	// to 10^8), so they are unique within a data set.
	p.mrn = fmt.Sprintf("MRN-%08d", (uint64(i)*48271+g.mrnOff)%1e8)
	s := (uint64(i)*69621 + g.ssnOff) % 1e8
	p.ssn = fmt.Sprintf("9%02d-%02d-%04d", s/1e6, s/1e4%100, s%1e4)
	p.clinician = clinicianNames[r.IntN(len(clinicianNames))]

	if i == edgeVIP {
		p.sensitivity = []string{"vip"}
	}
	if i == edgeOptedOut {
		p.consent = []string{"opt-out"}
	}
	return p
}

func (g *generator) fhirEntry(p person, typ, id, title, desc string, prio float64, modified time.Time, sens []string) manifestEntry {
	return g.entry(p, typ, id, fmt.Sprintf("fhir://%s/patients/%s/%s/%s", g.opts.Tenant, p.id, typ, id),
		title, desc, mimeFHIR, "fhir/"+id+".json", prio, modified, sens)
}

// entry builds a manifest line. Title, name and description name only the
// resource kind: never an identifier.
func (g *generator) entry(p person, typ, id, uri, title, desc, mime, file string, prio float64, modified time.Time, sens []string) manifestEntry {
	return manifestEntry{
		URI:         uri,
		Name:        typ + "-" + id[:8],
		Title:       title,
		Description: desc,
		MimeType:    mime,
		Annotations: annotations{Audience: audience, Priority: prio, LastModified: modified.Format(dateTimeFmt)},
		Labels: labels{
			Tenant:      g.opts.Tenant,
			Patient:     p.id,
			Type:        typ,
			Sensitivity: mergeLabels(p.sensitivity, sens),
			Consent:     p.consent,
		},
		File: file,
	}
}

func mergeLabels(a, b []string) []string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func roundTo(v float64, decimals int) float64 {
	m := math.Pow10(decimals)
	return math.Round(v*m) / m
}

// mustJSON encodes a FHIR resource. The generator's own types cannot fail
// to encode, so an error is a programming bug.
func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("synth: encode FHIR resource: %v", err))
	}
	return append(b, '\n')
}
