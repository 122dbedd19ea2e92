package minimize

// Exported for the tests of package minimize_test only.
var (
	KnownUnitText   = knownUnitText
	CapitalisedUnit = capitalisedUnit
)

var KnownAnnotation = knownAnnotation

var CapitalisedSymbol = func(s string) bool { return capitalisedSymbols[s] }

var CapitalisedAbbreviation = func(s string) bool { return capitalisedAbbreviations[s] }

func TimeUnit(s string) bool { _, ok := timeUnit(s); return ok }

var (
	R4Annotations       = r4Annotations
	AnnotationNameWords = annotationNameWords
)

var (
	UnitAbbreviations = unitAbbreviations
	CommonUnitWords   = commonUnitWords
	NamelessUnitWords = namelessUnitWords
)
