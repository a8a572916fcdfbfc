package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

func (s *Server) admissionRoutes() {
	s.handle("GET "+sizerapi.PathAdmissions, "admissions_read", roleAdmin, s.admissionsRead)
	s.handle("POST "+sizerapi.PathAdmissions, "admissions_swap", roleAdmin, s.admissionsSwap)
}

func (s *Server) admissionsRead(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	doc, v, err := s.st.AdmissionsVersion(r.Context())
	if err != nil {
		return nil, err
	}
	out := sizerapi.Admissions{Version: v}
	if len(doc) > 0 {
		out.Doc = doc
	}
	return out, nil
}

func (s *Server) admissionsSwap(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	r.Body = http.MaxBytesReader(w, r.Body, sizerapi.MaxAdmissionsBytes+4096)
	var in sizerapi.Admissions
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Version < 0 {
		return nil, badRequest("admissions version %d: want the version read (0 when none)", in.Version)
	}
	var probe struct {
		Version int               `json:"version"`
		Entries []json.RawMessage `json:"entries"`
	}
	if len(in.Doc) == 0 || json.Unmarshal(in.Doc, &probe) != nil || probe.Version != 1 {
		return nil, badRequest("admissions doc: want the admissions document, a JSON object with version 1 and entries")
	}
	v, ok, err := s.st.SwapAdmissions(context.WithoutCancel(r.Context()), in.Version, in.Doc)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &apiError{http.StatusConflict, sizerapi.CodeConflict, "the admissions changed since version " + strconv.FormatInt(in.Version, 10) + " was read; read them again and decide again"}
	}
	return sizerapi.Admissions{Version: v}, nil
}
