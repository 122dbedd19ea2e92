package bundle

// AuditLogUses are the actions exported as DICOM 110101 Audit Log Used.
var AuditLogUses = auditLogUses

// RealisticEntries are the records TestExportsPassOutsideValidators
// exports and validates.
var RealisticEntries = realisticEntries

// ServerNames are the server's action and reason names the exports read.
var ServerNames = []string{actionAuthReject, actionRateLimited, reasonDiskLow, reasonAggregate}

// OwnActs are the actions custos records as its own acts, and the
// principal of each.
var OwnActs = ownActs
