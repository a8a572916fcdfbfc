package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

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
	URL string
	// Fallbacks are the same endpoint on the other sizers (sizer.urls): a
	// post the current one does not answer (no connection, or 503) goes to
	// the next, which stays current while it answers.
	Fallbacks      []string
	CredentialFile string
	Client         *http.Client // required: pins the sizer's CA (internal/tlspin)
	cur            atomic.Int32
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
	Fallbacks      []string
	CredentialFile string
	Client         *http.Client
	sink           *HTTPSink
	once           sync.Once
}

// Announce posts one notice.
func (a *Announcer) Announce(ctx context.Context, in sizerapi.Interruption) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding interruption: %w", err)
	}
	a.once.Do(func() {
		a.sink = &HTTPSink{URL: a.URL, Fallbacks: a.Fallbacks, CredentialFile: a.CredentialFile, Client: a.Client}
	})
	return a.sink.post(ctx, body)
}

// errNoAnswer marks a post no sizer answered (worth trying the next).
var errNoAnswer = errors.New("the sizer did not answer")

func (h *HTTPSink) post(ctx context.Context, body []byte) error {
	if len(h.Fallbacks) == 0 {
		return h.postTo(ctx, h.URL, body)
	}
	all := append([]string{h.URL}, h.Fallbacks...)
	k := int(h.cur.Load()) % len(all)
	var errs []error
	for i := range all {
		j := (k + i) % len(all)
		err := h.postTo(ctx, all[j], body)
		if !errors.Is(err, errNoAnswer) || ctx.Err() != nil {
			if err == nil {
				h.cur.Store(int32(j))
			}
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (h *HTTPSink) postTo(ctx context.Context, url string, body []byte) error {
	if !strings.HasPrefix(url, "https://") || h.Client == nil {
		return fmt.Errorf("posting to %q: the sizer is reached over https only, with its CA pinned", url)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building report request for %q: %w", url, err)
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
		return fmt.Errorf("posting to %s: %w: %w", url, errNoAnswer, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == 400 || resp.StatusCode == 413 || resp.StatusCode == 422:
		return fmt.Errorf("posting to %s: %s: %s: %w", url, resp.Status, strings.TrimSpace(string(msg)), ErrRejected)
	case resp.StatusCode == 401 || resp.StatusCode == 403:
		return fmt.Errorf("posting to %s: %s (check the credential in %s): %s", url, resp.Status, h.CredentialFile, strings.TrimSpace(string(msg)))
	case resp.StatusCode == http.StatusServiceUnavailable:
		return fmt.Errorf("posting to %s: %s: %s: %w", url, resp.Status, strings.TrimSpace(string(msg)), errNoAnswer)
	default:
		return fmt.Errorf("posting to %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
}
