package ec2emu

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// apiError is an EC2 error document.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errf(status int, code, format string, a ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...any) *apiError {
	return errf(400, "InvalidParameterValue", format, a...)
}

// statusFor gives an error code's usual HTTP status.
func statusFor(code string) int {
	switch code {
	case "RequestLimitExceeded", "ServiceUnavailable", "Unavailable":
		return 503
	case "InternalError", "InsufficientInstanceCapacity", "InsufficientHostCapacity":
		return 500
	case "UnauthorizedOperation":
		return 403
	case "AuthFailure":
		return 401
	}
	return 400
}

type handler func(s *Server, q query, token string) (any, *apiError)

var handlers = map[string]handler{
	"CreateFleet":                  (*Server).createFleet,
	"RunInstances":                 (*Server).runInstances,
	"DescribeInstances":            (*Server).describeInstances,
	"TerminateInstances":           (*Server).terminateInstances,
	"CreateTags":                   (*Server).createTags,
	"DescribeSpotPriceHistory":     (*Server).describeSpotPriceHistory,
	"DescribeInstanceTypes":        (*Server).describeInstanceTypes,
	"CreateLaunchTemplate":         (*Server).createLaunchTemplate,
	"DescribeLaunchTemplates":      (*Server).describeLaunchTemplates,
	"StopInstances":                (*Server).stopInstances,
	"StartInstances":               (*Server).startInstances,
	"DescribeInstanceAttribute":    (*Server).describeInstanceAttribute,
	"DescribeSubnets":              (*Server).describeSubnets,
	"DescribeSecurityGroups":       (*Server).describeSecurityGroups,
	"DescribeImages":               (*Server).describeImages,
	"DescribeCapacityReservations": (*Server).describeCapacityReservations,
	"CreatePlacementGroup":         (*Server).createPlacementGroup,
	"DescribePlacementGroups":      (*Server).describePlacementGroups,
	"DescribeInstanceStatus":       (*Server).describeInstanceStatus,
}

// idempotent actions honour ClientToken.
var idempotent = map[string]bool{"CreateFleet": true, "RunInstances": true, "CreateLaunchTemplate": true}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.Header.Get("X-Amz-Target"), sqsTargetPrefix) {
		s.serveSQS(w, r)
		return
	}
	reqID := newRequestID()
	if r.Method != http.MethodPost {
		writeError(w, reqID, errf(400, "InvalidAction", "EC2 Query requests are POST /, got %s", r.Method))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		writeError(w, reqID, errf(400, "InvalidRequest", "reading request: %v", err))
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeError(w, reqID, errf(400, "MalformedQueryString", "parsing form body: %v", err))
		return
	}
	action := form.Get("Action")
	var aerr *apiError
	var out any
	var replay []byte
	switch {
	case r.Header.Get("Authorization") == "":
		aerr = errf(401, "AuthFailure", "AWS was not able to validate the provided access credentials (no Authorization header)")
	case form.Get("Version") != APIVersion:
		aerr = errf(400, "InvalidParameterValue", "unsupported API version %q; this emulator speaks %s", form.Get("Version"), APIVersion)
	case handlers[action] == nil:
		aerr = errf(400, "InvalidAction", "The action %s is not valid for this web service.", action)
	}
	if aerr == nil && s.opts.Latency > 0 {
		time.Sleep(s.Real(s.opts.Latency))
	}
	s.mu.Lock()
	var delayed time.Duration
	if aerr == nil {
		aerr = s.authorize(action, query{v: form})
	}
	if aerr == nil {
		f := s.pickFault("ec2", action)
		if f != nil && f.Delay > 0 { // a latency spike: not under the lock
			s.mu.Unlock()
			time.Sleep(f.Delay)
			s.mu.Lock()
			delayed = f.Delay
		}
		if f != nil && f.Code == "" {
			f = nil // latency only
		}
		if f != nil && !f.AfterEffect {
			aerr = s.faultError(f)
		}
		if aerr == nil {
			token := form.Get("ClientToken")
			key, hash := "", ""
			if idempotent[action] && token != "" {
				key, hash = action+"\x00"+token, paramHash(form)
				if e, ok := s.idem[key]; ok {
					if e.hash != hash {
						aerr = errf(400, "IdempotentParameterMismatch", "the client token %q was used with different parameters", token)
					} else {
						replay = e.body
					}
				}
			}
			if aerr == nil && replay == nil {
				out, aerr = handlers[action](s, query{v: form}, token)
				if aerr == nil {
					replay, err = render(action, reqID, out)
					if err != nil {
						aerr = errf(500, "InternalError", "rendering %s response: %v", action, err)
					} else if key != "" {
						s.idem[key] = idemEntry{hash: hash, body: replay}
					}
				}
			}
			if aerr == nil && f != nil { // AfterEffect: done, but the response is lost
				aerr = s.faultError(f)
			}
		}
	}
	code := ""
	if aerr != nil {
		code = aerr.Code
	}
	s.calls = append(s.calls, Call{Service: "ec2", Action: action, Params: form, Code: code, At: s.Now(), Delayed: delayed})
	s.mu.Unlock()
	if aerr != nil {
		writeError(w, reqID, aerr)
		return
	}
	s.checkModel("ec2", action, replay)
	s.wait(action) // HoldCalls: done, the answer held back
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write(replay)
}

func (s *Server) faultError(f *fault) *apiError {
	st := f.Status
	if st == 0 {
		st = statusFor(f.Code)
	}
	msg := f.Message
	if msg == "" {
		msg = "injected fault"
		if f.Code == "RequestLimitExceeded" {
			msg = "Request limit exceeded."
		}
	}
	return &apiError{Status: st, Code: f.Code, Message: msg}
}

func paramHash(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		if k != "ClientToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%q\n", k, form[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func newRequestID() string {
	var b [16]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func writeError(w http.ResponseWriter, reqID string, e *apiError) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<Response><Errors><Error><Code>")
	_ = xml.EscapeText(&b, []byte(e.Code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(e.Message))
	b.WriteString("</Message></Error></Errors><RequestID>")
	b.WriteString(reqID)
	b.WriteString("</RequestID></Response>")
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b.Bytes())
}

// render wraps out in <ActionResponse xmlns=...><requestId/>...</ActionResponse>.
func render(action, reqID string, out any) ([]byte, error) {
	inner, err := xml.Marshal(out)
	if err != nil {
		return nil, err
	}
	// out marshals as <x>...</x>; keep only its children.
	if i := bytes.IndexByte(inner, '>'); i >= 0 && bytes.HasPrefix(inner, []byte("<x")) {
		inner = inner[i+1 : len(inner)-len("</x>")]
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, "<%sResponse xmlns=%q><requestId>%s</requestId>", action, Namespace, reqID)
	b.Write(inner)
	fmt.Fprintf(&b, "</%sResponse>", action)
	return b.Bytes(), nil
}

// ---- XML shapes (only the fields the SDK reads that the emulator models) ----

type xItems[T any] struct {
	Items []T `xml:"item"`
}

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func stateOf(name string) xState { return xState{stateCodes[name], name} }

type xPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	GroupName        string `xml:"groupName,omitempty"`
	Tenancy          string `xml:"tenancy"`
}

type xMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	HTTPProtocolIPv6        string `xml:"httpProtocolIpv6"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type xStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xInstance struct {
	InstanceID                       string           `xml:"instanceId"`
	ImageID                          string           `xml:"imageId"`
	InstanceState                    xState           `xml:"instanceState"`
	PrivateDNSName                   string           `xml:"privateDnsName"`
	Reason                           string           `xml:"reason"` // StateTransitionReason
	AmiLaunchIndex                   int              `xml:"amiLaunchIndex"`
	InstanceType                     string           `xml:"instanceType"`
	LaunchTime                       string           `xml:"launchTime"`
	Placement                        xPlacement       `xml:"placement"`
	SubnetID                         string           `xml:"subnetId"`
	VpcID                            string           `xml:"vpcId"`
	PrivateIPAddress                 string           `xml:"privateIpAddress,omitempty"`
	Architecture                     string           `xml:"architecture"`
	InstanceLifecycle                string           `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID            string           `xml:"spotInstanceRequestId,omitempty"`
	ClientToken                      string           `xml:"clientToken,omitempty"`
	StateReason                      *xStateReason    `xml:"stateReason,omitempty"`
	TagSet                           *xItems[xTag]    `xml:"tagSet,omitempty"`
	MetadataOptions                  xMetadataOptions `xml:"metadataOptions"`
	CapacityReservationID            string           `xml:"capacityReservationId,omitempty"`
	CapacityReservationSpecification *xCRSpec         `xml:"capacityReservationSpecification,omitempty"`
}

type xCRSpec struct {
	Preference string     `xml:"capacityReservationPreference,omitempty"`
	Target     *xCRTarget `xml:"capacityReservationTarget,omitempty"`
}

type xCRTarget struct {
	ID string `xml:"capacityReservationId,omitempty"`
}

func (s *Server) instanceXML(in *instance) xInstance {
	m := in.MetadataOptions
	x := xInstance{
		InstanceID: in.ID, ImageID: in.ImageID, InstanceState: stateOf(in.State), Reason: in.StateTransitionReason,
		AmiLaunchIndex: in.LaunchIndex, InstanceType: in.InstanceType,
		LaunchTime: in.LaunchTime.UTC().Format("2006-01-02T15:04:05.000Z"),
		Placement:  xPlacement{AvailabilityZone: in.Zone, GroupName: in.PlacementGroup, Tenancy: "default"},
		SubnetID:   in.SubnetID, VpcID: "vpc-0burst0000000000", ClientToken: in.ClientToken, Architecture: s.architecture(in.InstanceType),
		MetadataOptions: xMetadataOptions{State: "applied", HTTPTokens: m.HTTPTokens, HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit,
			HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6, InstanceMetadataTags: m.InstanceMetadataTags},
	}
	if in.StateReasonCode != "" {
		x.StateReason = &xStateReason{in.StateReasonCode, in.StateReasonMessage}
	}
	if in.State != "terminated" {
		x.PrivateIPAddress = in.PrivateIP
		x.PrivateDNSName = "ip-" + strings.ReplaceAll(in.PrivateIP, ".", "-") + ".ec2.internal"
	}
	if in.Lifecycle == "spot" {
		x.InstanceLifecycle = "spot"
		x.SpotInstanceRequestID = "sir-" + in.ID[len(in.ID)-8:]
	}
	if len(in.Tags) > 0 {
		x.TagSet = &xItems[xTag]{Items: sortedTags(in.Tags)}
	}
	if in.CapacityReservation != "" {
		if cr := s.crByID(in.CapacityReservation); cr != nil && cr.block {
			x.InstanceLifecycle = "capacity-block"
		}
		x.CapacityReservationID = in.CapacityReservation
		x.CapacityReservationSpecification = &xCRSpec{Target: &xCRTarget{ID: in.CapacityReservation}}
	} else if in.Lifecycle == "on-demand" {
		x.CapacityReservationSpecification = &xCRSpec{Preference: "open"}
	}
	return x
}

func sortedTags(m map[string]string) []xTag {
	out := make([]xTag, 0, len(m))
	for k, v := range m {
		out = append(out, xTag{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

type xReservation struct {
	ReservationID string            `xml:"reservationId"`
	OwnerID       string            `xml:"ownerId"`
	InstancesSet  xItems[xInstance] `xml:"instancesSet"`
	GroupSet      struct{}          `xml:"groupSet"`
}
