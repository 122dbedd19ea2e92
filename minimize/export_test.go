package minimize

// Exported for the tests of package minimize_test only.
var (
	KnownUnitText   = knownUnitText
	CapitalisedUnit = capitalisedUnit
)

var KnownAnnotation = knownAnnotation
