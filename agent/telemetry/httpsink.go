package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/version"
)

// HTTPSink POSTs each batch as JSON to URL (https only) with
// "Authorization: Bearer <token>", the token being the first line of
// CredentialFile (re-read on every send so a renewed credential is picked
// up). 2xx is success; 400, 413 and 422 reject the batch for good
// (ErrRejected); anything else (429, 503, an outage) is retried later.
type HTTPSink struct {
	URL            string
	CredentialFile string
	Client         *http.Client // required: pins the sizer's CA (internal/tlspin)
}

// Send implements Sink.
func (h *HTTPSink) Send(ctx context.Context, b sizerapi.ReportBatch) error {
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encoding report batch: %w: %w", err, ErrRejected)
	}
	return h.post(ctx, body)
}

// Announcer posts Interruptions to URL like HTTPSink posts batches.
type Announcer struct {
	URL            string
	CredentialFile string
	Client         *http.Client
}

// Announce posts one notice.
func (a *Announcer) Announce(ctx context.Context, in sizerapi.Interruption) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding interruption: %w", err)
	}
	return (&HTTPSink{URL: a.URL, CredentialFile: a.CredentialFile, Client: a.Client}).post(ctx, body)
}

func (h *HTTPSink) post(ctx context.Context, body []byte) error {
	if !strings.HasPrefix(h.URL, "https://") || h.Client == nil {
		return fmt.Errorf("posting to %q: the sizer is reached over https only, with its CA pinned", h.URL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building report request for %q: %w", h.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(sizerapi.HeaderVersion, version.Version)
	if h.CredentialFile != "" {
		tok, err := auth.LoadCredential(h.CredentialFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return fmt.Errorf("posting to %s: %w", h.URL, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == 400 || resp.StatusCode == 413 || resp.StatusCode == 422:
		return fmt.Errorf("posting to %s: %s: %s: %w", h.URL, resp.Status, strings.TrimSpace(string(msg)), ErrRejected)
	case resp.StatusCode == 401 || resp.StatusCode == 403:
		return fmt.Errorf("posting to %s: %s (check the credential in %s): %s", h.URL, resp.Status, h.CredentialFile, strings.TrimSpace(string(msg)))
	default:
		return fmt.Errorf("posting to %s: %s: %s", h.URL, resp.Status, strings.TrimSpace(string(msg)))
	}
}
