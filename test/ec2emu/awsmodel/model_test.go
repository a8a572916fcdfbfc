package awsmodel

import (
	"os"
	"strings"
	"testing"
)

// a small model in botocore's form: one ec2-protocol and one JSON service
const ec2Model = `{"metadata":{"protocol":"ec2","endpointPrefix":"ec2"},
 "operations":{"DescribeThings":{"output":{"shape":"DescribeThingsResult"}},"DeleteThing":{}},
 "shapes":{
  "DescribeThingsResult":{"type":"structure","members":{
    "Things":{"shape":"ThingList","locationName":"thingSet"},
    "NextToken":{"shape":"String","locationName":"nextToken"}}},
  "ThingList":{"type":"list","member":{"shape":"Thing","locationName":"item"}},
  "Thing":{"type":"structure","required":["ThingId"],"members":{
    "ThingId":{"shape":"String","locationName":"thingId"},
    "State":{"shape":"ThingState","locationName":"state"},
    "Count":{"shape":"Integer","locationName":"count"},
    "Ready":{"shape":"Boolean","locationName":"ready"},
    "Made":{"shape":"DateTime","locationName":"made"}}},
  "ThingState":{"type":"string","enum":["pending","running"]},
  "String":{"type":"string"},"Integer":{"type":"integer"},"Boolean":{"type":"boolean"},"DateTime":{"type":"timestamp"}}}`

const jsonModel = `{"metadata":{"protocol":"json","endpointPrefix":"sqs"},
 "operations":{"GetThing":{"output":{"shape":"GetThingResult"}}},
 "shapes":{
  "GetThingResult":{"type":"structure","required":["Id"],"members":{
    "Id":{"shape":"String"},"Kind":{"shape":"Kind"},"Size":{"shape":"Integer"},
    "Attrs":{"shape":"AttrMap"},"Items":{"shape":"StringList"},"When":{"shape":"Timestamp"}}},
  "AttrMap":{"type":"map","key":{"shape":"Kind"},"value":{"shape":"String"}},
  "StringList":{"type":"list","member":{"shape":"String"}},
  "Kind":{"type":"string","enum":["All","Policy"]},
  "String":{"type":"string"},"Integer":{"type":"integer"},"Timestamp":{"type":"timestamp"}}}`

func mustParse(t *testing.T, doc string) *Model {
	t.Helper()
	m, err := Parse([]byte(doc), "test")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func thingXML(thing string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><DescribeThingsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId><thingSet>` +
		thing + `</thingSet></DescribeThingsResponse>`
}

func TestCheckEC2(t *testing.T) {
	m := mustParse(t, ec2Model)
	for _, tc := range []struct {
		name, op, body string
		want           string // "" = valid; else a substring of the one violation
	}{
		{"a correct response", "DescribeThings", thingXML(`<item><thingId>t-1</thingId><state>running</state><count>3</count><ready>true</ready><made>2026-12-01T10:00:00.000Z</made></item><item><thingId>t-2</thingId></item>`), ""},
		{"no output, only requestId", "DeleteThing", `<DeleteThingResponse><requestId>r</requestId></DeleteThingResponse>`, ""},
		{"no output: EC2's return true", "DeleteThing", `<DeleteThingResponse><requestId>r</requestId><return>true</return></DeleteThingResponse>`, ""},
		{"no output, but data", "DeleteThing", `<DeleteThingResponse><requestId>r</requestId><thingId>t</thingId></DeleteThingResponse>`, "the operation has no output, but the response holds <thingId>"},
		{"missing required member", "DescribeThings", thingXML(`<item><state>running</state></item>`), "DescribeThingsResult.Things[0].ThingId: required member missing"},
		{"wrong enum", "DescribeThings", thingXML(`<item><thingId>t</thingId><state>Running</state></item>`), `DescribeThingsResult.Things[0].State: "Running" is not one of the enum's 2 values`},
		{"wrong type: integer", "DescribeThings", thingXML(`<item><thingId>t</thingId><count>three</count></item>`), `Things[0].Count: "three" is not an integer`},
		{"wrong type: boolean", "DescribeThings", thingXML(`<item><thingId>t</thingId><ready>yes</ready></item>`), `Things[0].Ready: "yes" is not a boolean`},
		{"wrong type: timestamp", "DescribeThings", thingXML(`<item><thingId>t</thingId><made>yesterday</made></item>`), `not an ISO 8601 timestamp`},
		{"unknown element", "DescribeThings", thingXML(`<item><thingId>t</thingId><colour>red</colour></item>`), "<colour> is not a member of Thing"},
		{"wrong list element", "DescribeThings", thingXML(`<member><thingId>t</thingId></member>`), "list element <member>, want <item>"},
		{"member name instead of locationName", "DescribeThings", thingXML(`<item><thingId>t</thingId><State>running</State></item>`), "<State> is not a member of Thing"},
		{"a structure where a scalar belongs", "DescribeThings", `<DescribeThingsResponse><requestId>r</requestId><nextToken><a/></nextToken></DescribeThingsResponse>`, "a string holds elements"},
		{"repeated member", "DescribeThings", `<DescribeThingsResponse><requestId>r</requestId><nextToken>a</nextToken><nextToken>b</nextToken></DescribeThingsResponse>`, "appears 2 times"},
		{"wrong root", "DescribeThings", `<DescribeStuffResponse><requestId>r</requestId></DescribeStuffResponse>`, "want <DescribeThingsResponse>"},
		{"no requestId", "DeleteThing", `<DeleteThingResponse/>`, "requestId: missing or repeated"},
		{"unknown operation", "DescribeOthers", `<DescribeOthersResponse/>`, "has no operation DescribeOthers"},
		{"not XML", "DescribeThings", `{"x":1}`, "not XML"},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, m.Check(tc.op, []byte(tc.body)), tc.want) })
	}
}

func TestCheckJSON(t *testing.T) {
	m := mustParse(t, jsonModel)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"a correct response", `{"Id":"a","Kind":"All","Size":3,"Attrs":{"Policy":"x"},"Items":["p","q"],"When":1764583200.5}`, ""},
		{"missing required member", `{"Kind":"All"}`, "GetThingResult.Id: required member missing"},
		{"wrong enum", `{"Id":"a","Kind":"all"}`, `GetThingResult.Kind: "all" is not one of the enum's 2 values`},
		{"wrong map key enum", `{"Id":"a","Attrs":{"Colour":"x"}}`, `GetThingResult.Attrs{Colour}: "Colour" is not one of`},
		{"wrong type: integer as string", `{"Id":"a","Size":"3"}`, "GetThingResult.Size: a string (3), want an integer"},
		{"wrong type: fractional integer", `{"Id":"a","Size":3.5}`, "3.5 is not an integer"},
		{"wrong type: list as string", `{"Id":"a","Items":"p"}`, "GetThingResult.Items: a string, want an array"},
		{"wrong type: timestamp as string", `{"Id":"a","When":"2026-12-01T00:00:00Z"}`, "want epoch seconds"},
		{"null member", `{"Id":"a","Kind":null}`, "GetThingResult.Kind: null"},
		{"unknown key", `{"Id":"a","Colour":"red"}`, `"Colour" is not a member of GetThingResult`},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, m.Check("GetThing", []byte(tc.body)), tc.want) })
	}
}

func expect(t *testing.T, got []Violation, want string) {
	t.Helper()
	if want == "" {
		if len(got) != 0 {
			t.Fatalf("violations %v, want none", got)
		}
		return
	}
	if len(got) != 1 || !strings.Contains(got[0].String(), want) {
		t.Fatalf("violations %v, want exactly one containing %q", got, want)
	}
}

func TestParseRejects(t *testing.T) {
	for _, doc := range []string{`[]`, `{"metadata":{"protocol":"ec2"}}`,
		`{"metadata":{"protocol":"ec2"},"operations":{"X":{"output":{"shape":"Missing"}}},"shapes":{"S":{"type":"string"}}}`} {
		if _, err := Parse([]byte(doc), "bad.json"); err == nil || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("Parse(%s) = %v, want an error naming the file", doc, err)
		}
	}
}

// TestBotocoreModels: the real models load, and a real EC2 answer as AWS
// documents it (DescribeInstances with one instance) passes.
func TestBotocoreModels(t *testing.T) {
	set, err := Default()
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%v; BURST_REQUIRE_TOOLS=1 makes this a failure", err)
		}
		t.Skipf("SKIPPING: %v; set BURST_REQUIRE_TOOLS=1 to make this a failure", err)
	}
	if set.EC2.Protocol != "ec2" || set.SQS.Protocol != "json" {
		t.Fatalf("protocols %s, %s: want ec2 and json (awsJson1_0)", set.EC2.Protocol, set.SQS.Protocol)
	}
	body := `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>8f7724cf-496f-496e-8fe3-example</requestId>
<reservationSet><item><reservationId>r-1234567890abcdef0</reservationId><ownerId>123456789012</ownerId><groupSet/>
<instancesSet><item><instanceId>i-1234567890abcdef0</instanceId><imageId>ami-bff32ccc</imageId>
<instanceState><code>16</code><name>running</name></instanceState><instanceType>g6.xlarge</instanceType>
<launchTime>2026-12-01T17:45:16.000Z</launchTime><placement><availabilityZone>us-east-1a</availabilityZone><tenancy>default</tenancy></placement>
<tagSet><item><key>burst:node</key><value>l4-1</value></item></tagSet><instanceLifecycle>spot</instanceLifecycle></item></instancesSet></item></reservationSet>
</DescribeInstancesResponse>`
	if v := set.Check("ec2", "DescribeInstances", []byte(body)); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
	if v := set.Check("ec2", "DescribeInstances", []byte(strings.Replace(body, "<name>running</name>", "<name>up</name>", 1))); len(v) != 1 || !strings.Contains(v[0].String(), "InstanceStateName") && !strings.Contains(v[0].String(), `"up"`) {
		t.Fatalf("a wrong state name: %v", v)
	}
	if v := set.Check("sqs", "ReceiveMessage", []byte(`{"Messages":[{"MessageId":"m","ReceiptHandle":"h","Body":"{}","Attributes":{"SentTimestamp":"1"}}]}`)); len(v) != 0 {
		t.Fatalf("SQS violations %v", v)
	}
}
