package sizerapi

import "encoding/json"

// The shared admissions endpoints (admin token), when sizer.store is a
// PostgreSQL that several sizers and clusters share: every admission
// decision (burst-resume, the prolog, the sizer's release pass) reads the
// document, decides, and swaps in its new version only if nobody else
// wrote one in between (else it decides again):
//
//	GET  /v1/admissions  -> Admissions
//	POST /v1/admissions  Admissions (Version: the one read) -> Admissions (the new version), or 409 conflict
const PathAdmissions = "/v1/admissions"

// CodeConflict: the admissions document changed since it was read.
const CodeConflict = "conflict"

// MaxAdmissionsBytes bounds the admissions document.
const MaxAdmissionsBytes = 4 << 20

// Admissions is the admissions document (internal/admit's JSON; null
// when none was written yet) and its version.
type Admissions struct {
	Doc     json.RawMessage `json:"doc"`
	Version int64           `json:"version"`
}
