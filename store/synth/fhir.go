package synth

// Minimal FHIR R4 shapes, with fields in the order FHIR's own examples use
// so that files read naturally. Only what the generator fills is modelled.

type coding struct {
	System  string `json:"system,omitempty"`
	Code    string `json:"code,omitempty"`
	Display string `json:"display,omitempty"`
}

type codeableConcept struct {
	Coding []coding `json:"coding,omitempty"`
	Text   string   `json:"text,omitempty"`
}

type reference struct {
	Reference string `json:"reference,omitempty"`
	Display   string `json:"display,omitempty"`
}

type identifier struct {
	Use    string           `json:"use,omitempty"`
	Type   *codeableConcept `json:"type,omitempty"`
	System string           `json:"system,omitempty"`
	Value  string           `json:"value"`
}

type period struct {
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
}

type meta struct {
	LastUpdated string `json:"lastUpdated"`
}

type humanName struct {
	Use    string   `json:"use,omitempty"`
	Family string   `json:"family"`
	Given  []string `json:"given"`
}

type contactPoint struct {
	System string `json:"system"`
	Value  string `json:"value"`
	Use    string `json:"use,omitempty"`
}

type address struct {
	Use        string   `json:"use,omitempty"`
	Line       []string `json:"line"`
	City       string   `json:"city"`
	State      string   `json:"state"`
	PostalCode string   `json:"postalCode"`
	Country    string   `json:"country"`
}

type fhirPatient struct {
	ResourceType string         `json:"resourceType"`
	ID           string         `json:"id"`
	Meta         meta           `json:"meta"`
	Identifier   []identifier   `json:"identifier"`
	Active       bool           `json:"active"`
	Name         []humanName    `json:"name"`
	Telecom      []contactPoint `json:"telecom"`
	Gender       string         `json:"gender"`
	BirthDate    string         `json:"birthDate"`
	Address      []address      `json:"address"`
}

type quantity struct {
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	System string  `json:"system"`
	Code   string  `json:"code"`
}

type fhirObservation struct {
	ResourceType      string            `json:"resourceType"`
	ID                string            `json:"id"`
	Meta              meta              `json:"meta"`
	Status            string            `json:"status"`
	Category          []codeableConcept `json:"category"`
	Code              codeableConcept   `json:"code"`
	Subject           reference         `json:"subject"`
	Encounter         *reference        `json:"encounter,omitempty"`
	EffectiveDateTime string            `json:"effectiveDateTime"`
	Issued            string            `json:"issued"`
	Performer         []reference       `json:"performer,omitempty"`
	ValueQuantity     quantity          `json:"valueQuantity"`
}

type fhirCondition struct {
	ResourceType       string            `json:"resourceType"`
	ID                 string            `json:"id"`
	Meta               meta              `json:"meta"`
	ClinicalStatus     codeableConcept   `json:"clinicalStatus"`
	VerificationStatus codeableConcept   `json:"verificationStatus"`
	Category           []codeableConcept `json:"category"`
	Code               codeableConcept   `json:"code"`
	Subject            reference         `json:"subject"`
	OnsetDateTime      string            `json:"onsetDateTime"`
	RecordedDate       string            `json:"recordedDate"`
	Recorder           *reference        `json:"recorder,omitempty"`
}

type dosage struct {
	Text string `json:"text"`
}

type fhirMedicationRequest struct {
	ResourceType              string          `json:"resourceType"`
	ID                        string          `json:"id"`
	Meta                      meta            `json:"meta"`
	Status                    string          `json:"status"`
	Intent                    string          `json:"intent"`
	MedicationCodeableConcept codeableConcept `json:"medicationCodeableConcept"`
	Subject                   reference       `json:"subject"`
	AuthoredOn                string          `json:"authoredOn"`
	Requester                 reference       `json:"requester"`
	ReasonReference           []reference     `json:"reasonReference,omitempty"`
	DosageInstruction         []dosage        `json:"dosageInstruction"`
}

type participant struct {
	Individual reference `json:"individual"`
}

type fhirEncounter struct {
	ResourceType    string            `json:"resourceType"`
	ID              string            `json:"id"`
	Meta            meta              `json:"meta"`
	Identifier      []identifier      `json:"identifier"`
	Status          string            `json:"status"`
	Class           coding            `json:"class"`
	Type            []codeableConcept `json:"type"`
	Subject         reference         `json:"subject"`
	Participant     []participant     `json:"participant"`
	Period          period            `json:"period"`
	ServiceProvider reference         `json:"serviceProvider"`
}

type fhirCoverage struct {
	ResourceType string          `json:"resourceType"`
	ID           string          `json:"id"`
	Meta         meta            `json:"meta"`
	Identifier   []identifier    `json:"identifier"`
	Status       string          `json:"status"`
	Type         codeableConcept `json:"type"`
	SubscriberID string          `json:"subscriberId"`
	Beneficiary  reference       `json:"beneficiary"`
	Relationship codeableConcept `json:"relationship"`
	Period       period          `json:"period"`
	Payor        []reference     `json:"payor"`
	Class        []coverageClass `json:"class,omitempty"`
}

type coverageClass struct {
	Type  codeableConcept `json:"type"`
	Value string          `json:"value"`
	Name  string          `json:"name,omitempty"`
}
