// Package browser drives Debian's headless Chromium through chromedriver
// with the W3C WebDriver protocol over HTTP: a tiny client (new session,
// navigate, find elements, type, click, run a script, screenshot) with no
// dependency beyond the standard library, for the dashboard's end-to-end
// test.
package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Paths of Debian's packages chromium and chromium-driver.
const (
	Chromium     = "/usr/bin/chromium"
	ChromeDriver = "/usr/bin/chromedriver"
)

// Available says whether both are installed.
func Available() error {
	for _, p := range []string{Chromium, ChromeDriver} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s missing (Debian packages chromium and chromium-driver; scripts/install-deps.sh installs them): %w", p, err)
		}
	}
	return nil
}

// Options configure a browser.
type Options struct {
	// Width and Height of the window (default 1280 x 1000).
	Width, Height int
	// LogFile receives chromedriver's log ("" discards it).
	LogFile string
}

// Browser is one chromedriver with one Chromium session.
type Browser struct {
	driver  *exec.Cmd
	base    string // http://127.0.0.1:port
	session string
	profile string
	hc      *http.Client
	// the window size it was started with, and its height less the viewport's
	width, height, chrome int
}

// Start runs chromedriver on a free loopback port and opens a session of
// headless Chromium (as root: --no-sandbox) with a fresh profile and
// nothing that reaches the network by itself.
func Start(ctx context.Context, o Options) (*Browser, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Width == 0 {
		o.Width, o.Height = 1280, 1000
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	profile, err := os.MkdirTemp("", "burst-chromium-")
	if err != nil {
		return nil, err
	}
	args := []string{"--port=" + strconv.Itoa(port), "--allowed-ips=", "--allowed-origins=*"}
	if o.LogFile != "" {
		args = append(args, "--log-path="+o.LogFile)
	}
	cmd := exec.Command(ChromeDriver, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		return nil, fmt.Errorf("starting chromedriver: %w", err)
	}
	b := &Browser{driver: cmd, base: "http://127.0.0.1:" + strconv.Itoa(port), profile: profile, hc: &http.Client{Timeout: 90 * time.Second}}
	ready := false
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var st struct {
			Ready bool `json:"ready"`
		}
		if err := b.call(ctx, "GET", "/status", nil, &st); err == nil && st.Ready {
			ready = true
			break
		}
	}
	if !ready {
		b.Close()
		return nil, errors.New("chromedriver did not answer /status within 20 s")
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName":      "chrome",
		"pageLoadStrategy": "normal",
		"goog:chromeOptions": map[string]any{
			"binary": Chromium,
			"args": []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
				"--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
				"--user-data-dir=" + filepath.Join(profile, "profile"), fmt.Sprintf("--window-size=%d,%d", o.Width, o.Height)},
		},
	}}}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "POST", "/session", caps, &sess); err != nil {
		b.Close()
		return nil, fmt.Errorf("starting headless Chromium: %w", err)
	}
	b.session = sess.SessionID
	b.width, b.height = o.Width, o.Height
	var inner int
	if err := b.Exec(ctx, "return window.innerHeight", &inner); err == nil && inner > 0 && inner < o.Height {
		b.chrome = o.Height - inner
	}
	return b, nil
}

// Close ends the session, chromedriver (and Chromium) and the profile.
func (b *Browser) Close() {
	if b.session != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b.call(ctx, "DELETE", "/session/"+b.session, nil, nil)
		cancel()
		b.session = ""
	}
	if b.driver != nil && b.driver.Process != nil {
		syscall.Kill(-b.driver.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { b.driver.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-b.driver.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	os.RemoveAll(b.profile)
}

// Error is a WebDriver error answer.
type Error struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("webdriver %d %s: %s", e.Status, e.Code, e.Message)
}

func (b *Browser) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		js, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("webdriver %s %s: %d %.200s", method, path, resp.StatusCode, raw)
	}
	if resp.StatusCode != 200 {
		e := &Error{Status: resp.StatusCode}
		json.Unmarshal(env.Value, e)
		return e
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Value, out)
}

func (b *Browser) s(path string) string { return "/session/" + b.session + path }

// Navigate loads url and waits for the page to load.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	return b.call(ctx, "POST", b.s("/url"), map[string]string{"url": url}, nil)
}

// URL is the current page's address.
func (b *Browser) URL(ctx context.Context) (string, error) {
	var u string
	err := b.call(ctx, "GET", b.s("/url"), nil, &u)
	return u, err
}

// Element is a found element's reference.
type Element string

const elementKey = "element-6066-11e4-a52e-4f735466cecf" // the W3C web element identifier

// Find returns the first element matching a CSS selector.
func (b *Browser) Find(ctx context.Context, css string) (Element, error) {
	var ref map[string]string
	if err := b.call(ctx, "POST", b.s("/element"), map[string]string{"using": "css selector", "value": css}, &ref); err != nil {
		return "", err
	}
	if ref[elementKey] == "" {
		return "", fmt.Errorf("webdriver: no element reference in %v", ref)
	}
	return Element(ref[elementKey]), nil
}

// Type sends text to an element.
func (b *Browser) Type(ctx context.Context, e Element, text string) error {
	return b.call(ctx, "POST", b.s("/element/"+string(e)+"/value"), map[string]string{"text": text}, nil)
}

// Click clicks an element (and waits for a navigation it starts).
func (b *Browser) Click(ctx context.Context, e Element) error {
	return b.call(ctx, "POST", b.s("/element/"+string(e)+"/click"), map[string]string{}, nil)
}

// Exec runs a synchronous script in the page (through the driver, so the
// page's Content-Security-Policy does not apply) and decodes its result.
func (b *Browser) Exec(ctx context.Context, script string, out any, args ...any) error {
	if args == nil {
		args = []any{}
	}
	return b.call(ctx, "POST", b.s("/execute/sync"), map[string]any{"script": script, "args": args}, out)
}

// Screenshot returns a PNG of the whole page: the window is set to the
// document's height (at least the height it was started with), then back.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	var h int
	if err := b.Exec(ctx, "return Math.ceil(document.documentElement.scrollHeight)", &h); err != nil {
		return nil, err
	}
	// the window's outer height includes the (headless) browser chrome
	want := min(max(h+b.chrome, b.height), 8000)
	if err := b.call(ctx, "POST", b.s("/window/rect"), map[string]int{"width": b.width, "height": want}, nil); err != nil {
		return nil, err
	}
	defer b.call(ctx, "POST", b.s("/window/rect"), map[string]int{"width": b.width, "height": b.height}, nil)
	var s string
	if err := b.call(ctx, "GET", b.s("/screenshot"), nil, &s); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(s)
}
