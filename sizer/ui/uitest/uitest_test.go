package uitest

import (
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	view := []byte(`{"total_usd": 1234.5678, "accounts": [{"account": "nlp", "spent_usd": 0.01234, "used_pct": 12.34, "since": "2026-03-01T00:00:00Z"}], "n": 3, "ok": true}`)
	good := []Figure{{Key: "total_usd", Text: "$1,234.57"}, {Key: "accounts/0/account", Text: "nlp"}, {Key: "accounts/0/spent_usd", Text: " $0.0123 "},
		{Key: "accounts/0/used_pct", Text: "12.3%"}, {Key: "n", Text: "3"}, {Key: "ok", Text: "yes"},
		{Key: "accounts/0/since", Text: "1 March", DateTime: "2026-03-01T00:00:00.000Z"}}
	if bad := Compare(view, good); len(bad) != 0 {
		t.Errorf("good figures refused: %v", bad)
	}
	wrong := []Figure{{Key: "total_usd", Text: "$1,234.58"}, {Key: "accounts/0/account", Text: "vision"}, {Key: "accounts/1/account", Text: "nlp"},
		{Key: "accounts/0/spent_usd", Text: "$0.01"}, {Key: "n", Text: "three"}, {Key: "missing", Text: "0"}, {Key: "accounts", Text: "x"},
		{Key: "accounts/0/since", DateTime: "2026-03-02T00:00:00Z"}, {Key: "ok", Text: "no"}}
	bad := Compare(view, wrong)
	if len(bad) != len(wrong)-1 { // "$0.01" is 0.01234 at two decimals
		t.Errorf("%d of %d wrong figures caught: %s", len(bad), len(wrong), strings.Join(bad, "\n"))
	}
}

func TestFromHTML(t *testing.T) {
	page := `<td class="num" data-k="accounts/0/spent_usd">$1.00</td><a href="/x" data-k="jobs/0/job_id">12</a>
<time data-k="t" datetime="2026-03-01T00:00:00Z">March</time><td data-k="jobs/0/job_name">&lt;script&gt;x&amp;y</td>`
	figs := FromHTML(page)
	if len(figs) != 4 || figs[0].Text != "$1.00" || figs[1].Key != "jobs/0/job_id" || figs[2].DateTime != "2026-03-01T00:00:00Z" || figs[3].Text != "<script>x&y" {
		t.Errorf("figures %+v", figs)
	}
	if Count(figs, `^jobs/\d+/`) != 2 {
		t.Error("Count")
	}
}
