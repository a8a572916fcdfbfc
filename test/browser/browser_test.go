package browser

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBrowser: a page with a strict CSP loads; a form is typed into and
// submitted; scripts run through the driver (not the page); the inline
// script the page carries is blocked by its CSP; a screenshot is a PNG.
func TestBrowser(t *testing.T) {
	if err := Available(); err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'none'")
		w.Write([]byte(`<!DOCTYPE html><title>t</title><script>window.ran=1</script><p data-k="a">1.50</p>
<form method="post" action="/post"><input name="token" id="tok"><button id="go" type="submit">go</button></form>`))
	})
	mux.HandleFunc("GET /long", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!DOCTYPE html><body style="margin:0"><div style="height:2500px">tall</div></body>`))
	})
	mux.HandleFunc("POST /post", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Write([]byte(`<!DOCTYPE html><p id="got">` + r.PostForm.Get("token") + `</p>`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	var got []any
	if err := b.Exec(ctx, `return [window.ran === undefined, document.querySelector('[data-k]').textContent]`, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != true || got[1] != "1.50" {
		t.Errorf("page state %v: the inline script ran, or the text is wrong", got)
	}
	e, err := b.Find(ctx, "#tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Type(ctx, e, "s3cret"); err != nil {
		t.Fatal(err)
	}
	g, _ := b.Find(ctx, "#go")
	if err := b.Click(ctx, g); err != nil {
		t.Fatal(err)
	}
	var text string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && text != "s3cret"; time.Sleep(100 * time.Millisecond) {
		b.Exec(ctx, `var e = document.getElementById('got'); return e ? e.textContent : ''`, &text)
	}
	if text != "s3cret" {
		t.Errorf("the form post did not arrive: %q", text)
	}
	if u, _ := b.URL(ctx); !strings.HasSuffix(u, "/post") {
		t.Errorf("url %s", u)
	}
	shot, err := b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Errorf("screenshot is not a PNG: %v", err)
	}
	// a page taller than the window is taken whole, twice in a row
	if err := b.Navigate(ctx, srv.URL+"/long"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		shot, err := b.Screenshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil || img.Bounds().Dy() < 2500 || img.Bounds().Dx() != 800 {
			t.Errorf("screenshot %d of a 2500 px page: %v, %v", i, img.Bounds(), err)
		}
	}
}
