package minimize

import "testing"

// Record numbers EHRs print after a word other than MRN: Epic's EPI
// (enterprise id) and CSN (contact serial number), Oracle Health's FIN
// (the encounter's financial number), a visit or encounter number, a case
// number; and an MRN with a letter prefix (h-outside5's probe).
func TestScrubRecordNumbers(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"MRN: E4417206", "[MRN]"},
		{"EPI E4417206", "EPI [MRN]"},
		{"FIN 551207", "FIN [MRN]"},
		{"FIN-00551207", "FIN-[MRN]"},
		{"CSN 81773920145", "CSN [MRN]"},
		{"CSN: 81773920145.", "CSN: [MRN]."},
		{"Visit V00488213", "Visit [MRN]"},
		{"visit #V00488213", "visit #[MRN]"},
		{"encounter number 99812233", "encounter number [MRN]"},
		{"Encounter 99812233 closed", "Encounter [MRN] closed"},
		{"case no. 2024-55120", "case no. [MRN]"},
		{"Case # 2024-55120", "Case # [MRN]"},
	})
}

// Clinical and prose uses of the record numbers' words are kept: a trial
// schedule's visit, a case series, French "fin", a short number.
func TestScrubRecordNumbersKeepClinicalText(t *testing.T) {
	checkKept(t, []string{
		"Visit 2", "Visit 12 (week 24)", "case 3 of 5", "Case 12: 45-year-old", "CSN 2", "FIN de traitement 2024",
		"FIN 2024", "fin 551207", "epi 4417206", "follow-up visit in 6 weeks", "encounter 12", "case 2024",
		"EPI 2.5 mg", "visit 120/80", "OBX|1|NM|8867-4^Heart rate^LN||72|/min", "OBX|2|CWE|718-7^Hemoglobin^LN||13.5^g/dL^UCUM",
	})
}

// ehrPrefilterCases are strings at the edges of scrub_ehr.go's
// prefilters (mayHoldRecordKeyword, ...), which checkPrefilters holds to
// their regexps.
var ehrPrefilterCases = []string{
	"FIN 551207", "FIN-00551207", "xFIN 551207", "FINAL 551207", "CSN\t81773920145", "EPI E4417206", "epi E4417206",
	"viſit V00488213", "VISIT 00488213", "Visit\nnumber 00488213", "_visit 00488213", "encounter-99812233",
	"contact  serial 81773920145", "financial no. 551207", "case 2024-55120", "Case nr 2024-55120", "Episode ID 00551207",
	"admission n° 4417206", "Visit 2",
}

// TestScrubEHRPrefiltersAgree: scrub_ehr.go's prefilters are false only
// where their plain regexps find nothing.
func TestScrubEHRPrefiltersAgree(t *testing.T) {
	for _, s := range ehrPrefilterCases {
		checkPrefilters(t, s)
	}
}
