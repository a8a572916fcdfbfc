package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/sizer/dash"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/ui"
	"github.com/burst-hpc/burst/sizer/ui/uitest"
)

// TestFleetPageGroups: the Fleet page counts each class's nodes by Slurm
// state, lists the nodes that need attention first, counts the powered-down
// nodes with nothing to show rather than list them (all=1 lists them), and
// filters its rows (q); every figure still matches the /v1 view.
func TestFleetPageGroups(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 20, Now: now, Live: 2, Waits: true}); err != nil {
		t.Fatal(err)
	}
	var nodes []slurm.Node
	for _, n := range []string{"l4-1", "l4-2", "l4-3", "l4-4", "l4x4-1", "l4x4-2", "l4x4-3", "l4x4-4"} {
		nodes = append(nodes, slurm.Node{Name: n, State: "ALLOCATED", Flags: []string{"CLOUD"}})
	}
	for _, n := range []string{"l4-5", "l4-6", "l4-8"} {
		nodes = append(nodes, slurm.Node{Name: n, State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN"}})
	}
	nodes = append(nodes, slurm.Node{Name: "l4-7", State: "DOWN", Flags: []string{"CLOUD", "POWERED_DOWN"}, Reason: "Not responding"})
	pol, _ := sizing.New(catalog.Default(), "us-east-1", dashtest.Classes(), sizing.Params{})
	src, err := dash.New(dash.Options{Store: st, Policy: pol, Slurm: slurmfake.New(nil, nodes), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := auth.Generate()
	u, err := ui.New(ui.Options{Source: src, Verify: func(tok string) (auth.Principal, error) { return auth.Verify(admin, tok, time.Now(), nil) }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	h := u.Handler()
	page := func(path string) (int, string) {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	v, err := src.Fleet(ctx, dash.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	l4 := v.Classes[0]
	if l4.PoweredDown != 3 || l4.Attention < 1 || len(l4.States) < 2 || l4.States[0].State != "DOWN+POWERED_DOWN" || !l4.States[0].Attention || l4.States[0].Nodes != 1 {
		t.Fatalf("class l4: powered down %d, attention %d, states %+v", l4.PoweredDown, l4.Attention, l4.States)
	}
	js, _ := json.Marshal(v)
	code, body := page("/ui/fleet")
	if code != http.StatusOK {
		t.Fatalf("/ui/fleet: %d\n%s", code, body)
	}
	for _, bad := range uitest.Compare(js, uitest.FromHTML(body)) {
		t.Errorf("/ui/fleet: %s", bad)
	}
	row := func(b, n string) int { return strings.Index(b, `data-node="`+n+`"`) }
	if row(body, "l4-7") < 0 || row(body, "l4-1") >= 0 && row(body, "l4-7") > row(body, "l4-1") {
		t.Error("the DOWN node l4-7 is not listed first")
	}
	if row(body, "l4-5") >= 0 || !strings.Contains(body, `data-k="classes/0/powered_down">3<`) {
		t.Error("powered-down nodes listed, or not counted")
	}
	if _, all := page("/ui/fleet?all=1"); row(all, "l4-5") < 0 || row(all, "l4-8") < 0 {
		t.Error("all=1 does not list the powered-down nodes")
	}
	_, f := page("/ui/fleet?q=L4-6")
	if row(f, "l4-6") < 0 || row(f, "l4-7") >= 0 || row(f, "l4x4-1") >= 0 {
		t.Error("q=L4-6 does not list l4-6 alone")
	}
	if _, f := page("/ui/fleet?q=down"); row(f, "l4-7") < 0 || row(f, "l4-1") >= 0 {
		t.Error("q=down does not list the DOWN node alone")
	}
	if code, body := page("/ui/fleet?q=" + strings.Repeat("x", 101)); code != http.StatusBadRequest || !strings.Contains(body, "at most 100") {
		t.Errorf("a 101-character filter: %d %s", code, body)
	}
}
