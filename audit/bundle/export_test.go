package bundle

// AuditLogUses are the actions exported as DICOM 110101 Audit Log Used.
var AuditLogUses = auditLogUses

// RealisticEntries are the records TestExportsPassOutsideValidators
// exports and validates.
var RealisticEntries = realisticEntries
