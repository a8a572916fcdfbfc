package cmd

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/doctor"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
)

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestJSONKeysSnakeCase walks every type burst prints or serves as JSON
// (the API's wire types, route --json, reconcile --json, doctor --json):
// each exported field has a snake_case json key, or is embedded (its
// fields then checked), or is left out ("-").
func TestJSONKeysSnakeCase(t *testing.T) {
	types := []any{
		sizerapi.CredentialRequest{}, sizerapi.CredentialResponse{}, sizerapi.ErrorResponse{}, sizerapi.JobRequest{}, sizerapi.Unavailable{}, sizerapi.RankRequest{},
		sizerapi.RankResponse{}, sizerapi.RouteRequest{}, sizerapi.BootReport{}, sizerapi.BootPhase{}, sizerapi.FleetView{}, sizerapi.FleetClass{}, sizerapi.BreakerView{},
		sizerapi.FleetNode{}, sizerapi.UnavailablePool{}, sizerapi.FleetInterruption{}, sizerapi.JobDecision{}, sizerapi.JobInterruption{}, sizerapi.JobsView{},
		sizerapi.JobRow{}, sizerapi.MoneyView{}, sizerapi.AccountMoney{}, sizerapi.UserMoney{}, sizerapi.DayMoney{}, sizerapi.RightSizingView{}, sizerapi.RightSizingItem{},
		sizerapi.PeerVersion{}, sizerapi.Job{}, sizerapi.JobStart{}, sizerapi.JobEnd{}, sizerapi.InstanceEvent{}, sizerapi.LaunchIntent{}, sizerapi.IntentOffer{},
		sizerapi.JobRun{}, sizerapi.AccountSpend{}, sizerapi.LedgerInstance{}, sizerapi.Charge{}, sizerapi.Ledger{}, sizerapi.LedgerSync{}, sizerapi.GPUReading{},
		sizerapi.JobSummary{}, sizerapi.Event{}, sizerapi.JobEvent{}, sizerapi.Record{}, sizerapi.ReportBatch{}, sizerapi.ReportResult{}, sizerapi.Interruption{},
		sizerapi.BudgetStatus{}, sizerapi.UsageRow{}, sizerapi.JobSpend{}, sizerapi.Advice{}, sizerapi.UsageReport{},
		sizing.Decision{}, routeAnswer{}, reconcileJSON{}, doctor.Result{},
	}
	seen := map[reflect.Type]bool{}
	var bad []string
	var check func(typ reflect.Type, where string)
	check = func(typ reflect.Type, where string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map || typ.Kind() == reflect.Array {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeOf(time.Time{}) {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			switch {
			case name == "-":
				continue
			case f.Anonymous && name == "":
				check(f.Type, where)
				continue
			case !snake.MatchString(name):
				bad = append(bad, typ.String()+"."+f.Name+" (key "+keyOf(name, f.Name)+")")
			}
			check(f.Type, where)
		}
	}
	for _, x := range types {
		check(reflect.TypeOf(x), reflect.TypeOf(x).String())
	}
	if len(bad) > 0 {
		t.Errorf("%d JSON keys are not snake_case:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
}

func keyOf(tag, field string) string {
	if tag == "" {
		return field
	}
	return tag
}
