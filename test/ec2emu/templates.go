package ec2emu

import (
	"encoding/base64"
	"encoding/xml"
	"sort"
	"strconv"
	"strings"
	"time"
)

type launchTemplate struct {
	ID, Name     string
	ImageID      string
	InstanceType string
	UserData     []byte
	Profile      string
	SGs          []string
	NICs         []NetworkInterface           // LaunchTemplateData.NetworkInterfaces (efa.go)
	Meta         MetadataOptions              // fields set by the template; zero = unset
	Shutdown     string                       // InstanceInitiatedShutdownBehavior, "" = unset
	TagSpecs     map[string]map[string]string // resource type -> tags
	Tags         map[string]string
	Created      time.Time
}

// LaunchTemplateSpec describes a launch template an admin created beforehand.
type LaunchTemplateSpec struct {
	Name         string
	ImageID      string
	UserData     []byte // raw
	MetadataTags bool   // InstanceMetadataTags=enabled
	// MetadataOptions, when set, are the template's metadata options
	// (zero fields unset); HttpTokens defaults to required.
	MetadataOptions *MetadataOptions
	// ShutdownBehavior is InstanceInitiatedShutdownBehavior ("stop",
	// "terminate"; "" = unset, EC2's default stop).
	ShutdownBehavior string
	Tags             map[string]string
}

// AddLaunchTemplate creates a launch template as if an admin had, and
// returns its id.
func (s *Server) AddLaunchTemplate(spec LaunchTemplateSpec) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := MetadataOptions{HTTPTokens: "required"}
	if spec.MetadataOptions != nil {
		meta = spec.MetadataOptions.over(meta)
	}
	if spec.MetadataTags {
		meta.InstanceMetadataTags = "enabled"
	}
	lt := &launchTemplate{ID: s.newID("lt-"), Name: spec.Name, ImageID: spec.ImageID, UserData: spec.UserData,
		Meta: meta, Shutdown: spec.ShutdownBehavior, Tags: spec.Tags, Created: s.Now(),
		TagSpecs: map[string]map[string]string{}}
	s.templates[lt.ID] = lt
	return lt.ID
}

type xLaunchTemplate struct {
	LaunchTemplateID     string        `xml:"launchTemplateId"`
	LaunchTemplateName   string        `xml:"launchTemplateName"`
	CreateTime           string        `xml:"createTime"`
	CreatedBy            string        `xml:"createdBy"`
	DefaultVersionNumber int           `xml:"defaultVersionNumber"`
	LatestVersionNumber  int           `xml:"latestVersionNumber"`
	TagSet               *xItems[xTag] `xml:"tagSet,omitempty"`
}

func (s *Server) templateXML(lt *launchTemplate) xLaunchTemplate {
	x := xLaunchTemplate{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name,
		CreateTime: lt.Created.UTC().Format("2006-01-02T15:04:05.000Z"), CreatedBy: "arn:aws:iam::" + s.opts.Account + ":user/burst",
		DefaultVersionNumber: 1, LatestVersionNumber: 1}
	if len(lt.Tags) > 0 {
		x.TagSet = &xItems[xTag]{Items: sortedTags(lt.Tags)}
	}
	return x
}

func (s *Server) templateByName(name string) *launchTemplate {
	for _, lt := range s.templates {
		if lt.Name == name {
			return lt
		}
	}
	return nil
}

func (s *Server) createLaunchTemplate(q query, _ string) (any, *apiError) {
	name := q.get("LaunchTemplateName")
	if name == "" || len(name) > 128 {
		return nil, errf(400, "MissingParameter", "LaunchTemplateName is required (3-128 characters)")
	}
	if s.templateByName(name) != nil {
		return nil, errf(400, "InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	d := q.sub("LaunchTemplateData")
	ud, err := base64.StdEncoding.DecodeString(d.get("UserData"))
	if err != nil {
		return nil, invalid("Invalid BASE64 encoding of user data.")
	}
	meta, aerr := parseMetadataOptions(d.sub("MetadataOptions"))
	if aerr != nil {
		return nil, aerr
	}
	shutdown, aerr := parseShutdownBehavior(d.get("InstanceInitiatedShutdownBehavior"))
	if aerr != nil {
		return nil, aerr
	}
	lt := &launchTemplate{ID: s.newID("lt-"), Name: name, ImageID: d.get("ImageId"), InstanceType: d.get("InstanceType"),
		UserData: ud, Profile: d.get("IamInstanceProfile.Name") + d.get("IamInstanceProfile.Arn"),
		SGs: d.strings("SecurityGroupId"), Meta: meta, Shutdown: shutdown,
		TagSpecs: d.tagSpecs("TagSpecification"), Created: s.Now(), NICs: parseNICs(d, "NetworkInterface")}
	if lt.ImageID == "" {
		return nil, errf(400, "MissingParameter", "LaunchTemplateData.ImageId is required by this emulator")
	}
	lt.Tags = q.tagSpecs("TagSpecification")["launch-template"]
	s.templates[lt.ID] = lt
	return struct {
		XMLName        xml.Name        `xml:"x"`
		LaunchTemplate xLaunchTemplate `xml:"launchTemplate"`
	}{LaunchTemplate: s.templateXML(lt)}, nil
}

func (s *Server) describeLaunchTemplates(q query, _ string) (any, *apiError) {
	var out []xLaunchTemplate
	names, ids := q.strings("LaunchTemplateName"), q.strings("LaunchTemplateId")
	for _, n := range names {
		lt := s.templateByName(n)
		if lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
		out = append(out, s.templateXML(lt))
	}
	for _, id := range ids {
		lt := s.templates[id]
		if lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		out = append(out, s.templateXML(lt))
	}
	if len(names)+len(ids) == 0 {
		for _, lt := range s.templates {
			out = append(out, s.templateXML(lt))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].LaunchTemplateName < out[j].LaunchTemplateName })
	}
	return struct {
		XMLName         xml.Name                `xml:"x"`
		LaunchTemplates xItems[xLaunchTemplate] `xml:"launchTemplates"`
	}{LaunchTemplates: xItems[xLaunchTemplate]{out}}, nil
}

// resolveTemplate finds the template of a LaunchTemplateSpecification.
func (s *Server) resolveTemplate(q query) (*launchTemplate, *apiError) {
	id, name, ver := q.get("LaunchTemplateId"), q.get("LaunchTemplateName"), q.get("Version")
	var lt *launchTemplate
	switch {
	case id != "" && name != "":
		return nil, invalid("specify either the launch template id or its name, not both")
	case id != "":
		if lt = s.templates[id]; lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	case name != "":
		if lt = s.templateByName(name); lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
	default:
		return nil, errf(400, "MissingParameter", "a launch template id or name is required")
	}
	if ver != "" && ver != "$Default" && ver != "$Latest" && ver != "1" {
		return nil, errf(400, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s", ver, lt.ID)
	}
	return lt, nil
}

// ---- metadata options and shutdown behaviour ----

// over returns base with m's set fields in place of its own.
func (m MetadataOptions) over(base MetadataOptions) MetadataOptions {
	if m.HTTPTokens != "" {
		base.HTTPTokens = m.HTTPTokens
	}
	if m.HTTPPutResponseHopLimit != 0 {
		base.HTTPPutResponseHopLimit = m.HTTPPutResponseHopLimit
	}
	if m.HTTPEndpoint != "" {
		base.HTTPEndpoint = m.HTTPEndpoint
	}
	if m.HTTPProtocolIPv6 != "" {
		base.HTTPProtocolIPv6 = m.HTTPProtocolIPv6
	}
	if m.InstanceMetadataTags != "" {
		base.InstanceMetadataTags = m.InstanceMetadataTags
	}
	return base
}

// parseMetadataOptions reads a MetadataOptions structure (RunInstances'
// InstanceMetadataOptionsRequest or a template's); unset fields stay zero.
func parseMetadataOptions(q query) (MetadataOptions, *apiError) {
	var m MetadataOptions
	oneOf := func(field string, dst *string, ok ...string) *apiError {
		v := q.get(field)
		if v == "" {
			return nil
		}
		for _, o := range ok {
			if v == o {
				*dst = v
				return nil
			}
		}
		return invalid("The value '%s' is not valid for MetadataOptions.%s; valid values are %s.", v, field, strings.Join(ok, ", "))
	}
	for _, f := range []struct {
		name string
		dst  *string
		ok   []string
	}{
		{"HttpTokens", &m.HTTPTokens, []string{"optional", "required"}},
		{"HttpEndpoint", &m.HTTPEndpoint, []string{"enabled", "disabled"}},
		{"HttpProtocolIpv6", &m.HTTPProtocolIPv6, []string{"enabled", "disabled"}},
		{"InstanceMetadataTags", &m.InstanceMetadataTags, []string{"enabled", "disabled"}},
	} {
		if err := oneOf(f.name, f.dst, f.ok...); err != nil {
			return m, err
		}
	}
	if v := q.get("HttpPutResponseHopLimit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return m, invalid("The value '%s' is not valid for MetadataOptions.HttpPutResponseHopLimit; it must be an integer from 1 to 64.", v)
		}
		m.HTTPPutResponseHopLimit = n
	}
	return m, nil
}

func parseShutdownBehavior(v string) (string, *apiError) {
	switch v {
	case "", "stop", "terminate":
		return v, nil
	}
	return "", invalid("The value '%s' is not valid for InstanceInitiatedShutdownBehavior; valid values are stop, terminate.", v)
}
