package minimize

import "strings"

// Identifiers as EHRs and their interfaces print them in free text,
// beyond the MRN after its own word (mrnCore): record numbers named by
// other words.
const (
	// recordKeyword names a record number of the patient or of one of
	// the patient's encounters: Epic's EPI (the enterprise patient id)
	// and CSN (contact serial number, an encounter's), Oracle Health's
	// FIN (the financial number, an encounter's; also FIN-00551207), a
	// visit or encounter number, and, with a number's mark only (numMark:
	// "case no.", "episode #", "admission number"), a case, an episode
	// or an admission, words clinical prose uses for other things ("case
	// 3 of 5"). The capitals EPI, FIN and CSN count as written only
	// ("fin" is French for "end"). The word is kept.
	recordKeyword = `\b(?:(?:EPI|FIN|CSN|(?i:visit|encounter|contact\s+serial(?:\s+number)?|financial(?:\s+number)?))\b(?:\s*` + numMark + `)?` +
		`|(?i:case|episode|admission)\b\s*` + numMark + `)\s*[:=#\-]?\s*`
	// recordValue is the number: up to three capitals (Epic's E4417206,
	// a visit's V00488213), then digits, in groups joined by "-" (a case
	// number 2024-55120). recordDigits holds it to six digits or more,
	// so "Visit 2", "CSN 2", "FIN 2024", "visit 120/80" are kept.
	recordValue = `[A-Z]{0,3}[0-9]+(?:-[0-9]+)*`
)

// recordPatterns are the patterns of this file's record numbers, in the
// order scrubPatterns applies them (after the MRN's).
var recordPatterns = []scrubPattern{
	newScrubPattern(classMRN, "[MRN]", recordKeyword, recordValue, notAlnumEnd).onlyIf(mayHoldRecordKeyword).checked(recordDigits),
}

// recordCapitals are recordKeyword's words in capitals, recordWords its
// others as (?i) reads them.
var (
	recordCapitals = []string{"EPI", "FIN", "CSN"}
	recordWords    = newWordSet("visit", "encounter", "contact serial", "financial", "case", "episode", "admission")
)

// mayHoldRecordKeyword is false only for a string in which recordKeyword
// has no match: each begins with one of recordCapitals as written or
// one of recordWords.
func mayHoldRecordKeyword(s string) bool {
	for _, w := range recordCapitals {
		if strings.Contains(s, w) {
			return true
		}
	}
	return recordWords.mayHold(s)
}

// recordDigits: a record number has six digits or more.
func recordDigits(core string) bool {
	_, d := alnumCounts(core)
	return d >= 6
}
