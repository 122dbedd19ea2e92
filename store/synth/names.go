package synth

// The embedded lists below are the only sources of names, places and codes.
// Every person is fictional; phone numbers use the reserved 555-01xx block,
// e-mail addresses use the reserved example.com domain, SSNs use the 9xx
// area numbers that the Social Security Administration never issues, and
// clinical codes are illustrative.

var givenFemale = []string{
	"Alice", "Beatrix", "Camila", "Dora", "Elena", "Freya", "Greta", "Hazel",
	"Ingrid", "Juniper", "Kiara", "Lucia", "Mirela", "Noor", "Odette", "Priya",
}

var givenMale = []string{
	"Arlo", "Bram", "Caspian", "Dmitri", "Emeric", "Felix", "Gideon", "Hugo",
	"Idris", "Jasper", "Kofi", "Leopold", "Matteo", "Nikolai", "Osric", "Quentin",
}

var familyNames = []string{
	"Abernathy", "Balogun", "Castellanos", "Drummond", "Eriksen", "Fairweather",
	"Galloway", "Hargrove", "Ishikawa", "Jankowski", "Kowalczyk", "Lindqvist",
	"Montgomery", "Nakamura", "Okonkwo", "Pemberton", "Quintero", "Rasmussen",
	"Szymanski", "Thistlewood", "Underhill", "Vasquez", "Whitcombe", "Yamamoto",
}

var clinicianNames = []string{
	"Dr. Avery Quill", "Dr. Bianca Marlowe", "Dr. Cyrus Penhallow", "Dr. Delphine Arkwright",
	"Dr. Ezra Vantongeren", "Dr. Fiona Castellane", "Dr. Gareth Ormsby", "Dr. Helena Strand",
}

var streets = []string{
	"Maple Street", "Oak Avenue", "Cedar Lane", "Birch Road", "Willow Court",
	"Elm Drive", "Juniper Way", "Aspen Terrace", "Chestnut Boulevard", "Sycamore Place",
}

// place is a city with a ZIP3 prefix whose population is above 20,000, so
// Safe Harbor lets a de-identified view keep the ZIP3.
type place struct {
	city, state, zip3, areaCode string
}

var places = []place{
	{"Boston", "MA", "021", "617"},
	{"Springfield", "IL", "627", "217"},
	{"Austin", "TX", "787", "512"},
	{"Denver", "CO", "802", "303"},
	{"Portland", "OR", "972", "503"},
	{"Madison", "WI", "537", "608"},
	{"Columbus", "OH", "432", "614"},
	{"Raleigh", "NC", "276", "919"},
	{"Sacramento", "CA", "958", "916"},
	{"Albany", "NY", "122", "518"},
	{"Richmond", "VA", "232", "804"},
	{"Tucson", "AZ", "857", "520"},
	{"Omaha", "NE", "681", "402"},
	{"Burlington", "VT", "054", "802"},
	{"Boise", "ID", "837", "208"},
}

// restrictedPlace is in ZIP3 036, one of the three-digit ZIP areas with
// 20,000 or fewer people, which Safe Harbor requires to be reported as 000.
var restrictedPlace = place{"Walpole", "NH", "036", "603"}

// RestrictedZIP3 lists the three-digit ZIP prefixes with a population of
// 20,000 or fewer (US Census 2000 figures used by HHS Safe Harbor guidance).
// Only the zip3_restricted edge-case patient lives in one of them.
var RestrictedZIP3 = []string{
	"036", "059", "063", "102", "203", "556", "692", "790", "821",
	"823", "830", "831", "878", "879", "884", "890", "893",
}

// labTest is a LOINC-coded laboratory test or vital sign with a plausible
// range for synthetic values.
type labTest struct {
	loinc, display, unit, ucum string
	lo, hi                     float64
	decimals                   int
	vital                      bool
}

var labTests = []labTest{
	{"2345-7", "Glucose [Mass/volume] in Serum or Plasma", "mg/dL", "mg/dL", 70, 160, 0, false},
	{"718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", "g/dL", 11, 17.5, 1, false},
	{"2160-0", "Creatinine [Mass/volume] in Serum or Plasma", "mg/dL", "mg/dL", 0.6, 1.5, 2, false},
	{"4548-4", "Hemoglobin A1c/Hemoglobin.total in Blood", "%", "%", 4.6, 9.2, 1, false},
	{"2093-3", "Cholesterol [Mass/volume] in Serum or Plasma", "mg/dL", "mg/dL", 130, 260, 0, false},
	{"2823-3", "Potassium [Moles/volume] in Serum or Plasma", "mmol/L", "mmol/L", 3.4, 5.3, 1, false},
	{"8867-4", "Heart rate", "beats/minute", "/min", 54, 104, 0, true},
	{"8310-5", "Body temperature", "C", "Cel", 36.1, 38.2, 1, true},
	{"29463-7", "Body weight", "kg", "kg", 48, 118, 1, true},
}

// diagnosis is a condition coded in SNOMED CT and ICD-10-CM, optionally with
// the medication that treats it (RxNorm, illustrative).
type diagnosis struct {
	snomed, snomedDisplay, icd10, icd10Display, text string
	rxnorm, medication, dosage                       string
}

var commonDiagnoses = []diagnosis{
	{"59621000", "Essential hypertension", "I10", "Essential (primary) hypertension", "Hypertension",
		"314076", "Lisinopril 10 MG Oral Tablet", "Take 1 tablet by mouth once daily"},
	{"44054006", "Diabetes mellitus type 2", "E11.9", "Type 2 diabetes mellitus without complications", "Type 2 diabetes",
		"861007", "Metformin hydrochloride 500 MG Oral Tablet", "Take 1 tablet by mouth twice daily with meals"},
	{"55822004", "Hyperlipidemia", "E78.5", "Hyperlipidemia, unspecified", "Hyperlipidemia",
		"617310", "Atorvastatin 20 MG Oral Tablet", "Take 1 tablet by mouth at bedtime"},
	{"195967001", "Asthma", "J45.909", "Unspecified asthma, uncomplicated", "Asthma",
		"745679", "Albuterol 0.09 MG/ACTUAT Metered Dose Inhaler", "Inhale 2 puffs every 4 to 6 hours as needed"},
	{"40930008", "Hypothyroidism", "E03.9", "Hypothyroidism, unspecified", "Hypothyroidism",
		"966222", "Levothyroxine Sodium 0.05 MG Oral Tablet", "Take 1 tablet by mouth every morning"},
	{"235595009", "Gastroesophageal reflux disease", "K21.9", "Gastro-esophageal reflux disease without esophagitis", "GERD",
		"198053", "Omeprazole 20 MG Delayed Release Oral Capsule", "Take 1 capsule by mouth before breakfast"},
	{"239873007", "Osteoarthritis of knee", "M17.9", "Osteoarthritis of knee, unspecified", "Knee osteoarthritis",
		"197806", "Ibuprofen 400 MG Oral Tablet", "Take 1 tablet by mouth every 8 hours as needed with food"},
	{"37796009", "Migraine", "G43.909", "Migraine, unspecified, not intractable, without status migrainosus", "Migraine",
		"313782", "Sumatriptan 50 MG Oral Tablet", "Take 1 tablet at migraine onset; may repeat once after 2 hours"},
}

// hivDiagnosis is the sensitive condition of the hiv edge-case patient.
var hivDiagnosis = diagnosis{
	"86406008", "Human immunodeficiency virus infection", "B20", "Human immunodeficiency virus [HIV] disease", "HIV infection",
	"1999667", "Bictegravir 50 MG / Emtricitabine 200 MG / Tenofovir alafenamide 25 MG Oral Tablet", "Take 1 tablet by mouth once daily",
}

// sudDiagnosis is the 42 CFR Part 2 condition of the sud edge-case patient.
var sudDiagnosis = diagnosis{
	"75544000", "Opioid dependence", "F11.20", "Opioid dependence, uncomplicated", "Opioid use disorder",
	"1010606", "Buprenorphine 8 MG / Naloxone 2 MG Sublingual Film", "Dissolve 1 film under the tongue once daily",
}

var payors = []string{
	"Synthetic Mutual Health Plan", "Example Blue Shield (synthetic)", "Demo Care Alliance", "Fictional Medicaid Program",
}
