package userdata

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func valid() UserData {
	return UserData{
		NodeName: "gpu-1",
		Cluster:  "lab",
		IssuedAt: time.Date(2026, 11, 29, 14, 0, 0, 123000000, time.UTC),
		Slurm:    Slurm{Controllers: []string{"head-1", "10.0.0.2"}},
		Munge:    Munge{KeySource: "arn:aws:secretsmanager:us-east-1:123456789012:secret:burst/munge-AbCdEf"},
		FSx: FSx{
			DNSName:        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
			MountName:      "abcdef12",
			MountPoint:     "/fsx",
			CheckpointRoot: "/fsx/checkpoints",
		},
		Agent: Agent{
			SizerURL:       "http://10.0.0.2:8080",
			Credential:     "tok_0123456789abcdef",
			ReportInterval: Duration(10 * time.Second),
		},
	}
}

func TestRoundTrip(t *testing.T) {
	cases := map[string]func(*UserData){
		"production": func(*UserData) {},
		"file conf and test switch": func(u *UserData) {
			u.Slurm.ConfMode = ConfFile
			u.Slurm.ConfPath = "/tmp/lab/etc/slurm.conf"
			u.Slurm.Port = 16817
			u.Munge = Munge{KeySource: "file:///tmp/lab/munge/munge.key", KeyPath: "/tmp/inst1/munge.key", Socket: "/tmp/lab/munge/run/munge.sock"}
			u.Agent.IMDSEndpoint = "http://127.0.0.1:1338"
			u.Test = &Test{LocalFSDir: "/tmp/lab/fsx"}
			u.FSx.MountPoint = "/tmp/inst1/fsx"
			u.FSx.CheckpointRoot = "/tmp/inst1/fsx/ckpt"
		},
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			in := valid()
			mod(&in)
			b, err := Encode(in)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.HasPrefix(b, []byte("#burst-userdata v1\n{")) {
				t.Fatalf("document does not start with the header: %q", b[:30])
			}
			out, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode(Encode(x)): %v\n%s", err, b)
			}
			in.ApplyDefaults()
			if !in.IssuedAt.Equal(out.IssuedAt) {
				t.Fatalf("issued_at %v != %v", out.IssuedAt, in.IssuedAt)
			}
			out.IssuedAt = in.IssuedAt
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("round trip changed the document:\n in  %+v\n out %+v", in, out)
			}
			// base64 as EC2 wants it, and back.
			enc := base64.StdEncoding.EncodeToString(b)
			raw, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || !bytes.Equal(raw, b) {
				t.Fatalf("base64 round trip failed: %v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	u := valid()
	// Only required fields: Decode must fill in the optional ones.
	min := Header + `
{"node_name":"gpu-1","cluster":"lab","issued_at":"2026-11-29T14:00:00.123Z",
 "slurm":{"controllers":["head-1","10.0.0.2"]},
 "munge":{"key_source":"arn:aws:secretsmanager:us-east-1:123456789012:secret:burst/munge-AbCdEf"},
 "fsx":{"dns_name":"fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com","mount_name":"abcdef12","mount_point":"/fsx","checkpoint_root":"/fsx/checkpoints"},
 "agent":{"sizer_url":"http://10.0.0.2:8080","credential":"tok_0123456789abcdef"}}
`
	out, err := Decode([]byte(min))
	if err != nil {
		t.Fatal(err)
	}
	if out.Slurm.Port != 6817 || out.Slurm.ConfMode != ConfConfigless || out.Munge.KeyPath != "/etc/munge/munge.key" ||
		out.Munge.Socket != "/run/munge/munge.socket.2" || time.Duration(out.Agent.ReportInterval) != 15*time.Second {
		t.Fatalf("defaults not applied: %+v", out)
	}
	if got, want := out.Slurm.ConfServer(), "head-1:6817,10.0.0.2:6817"; got != want {
		t.Fatalf("ConfServer = %q, want %q", got, want)
	}
	arn, region, ok := out.Munge.SecretARN()
	if !ok || region != "us-east-1" || arn != u.Munge.KeySource {
		t.Fatalf("SecretARN = %q %q %v", arn, region, ok)
	}
	if _, ok := out.Munge.KeyFile(); ok {
		t.Fatal("KeyFile ok for an ARN")
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(valid())
	if err != nil {
		t.Fatal(err)
	}
	body := string(good[len(Header)+1:])
	cases := []struct {
		name string
		doc  string
		want []string // substrings that must all appear
	}{
		{"empty", "", []string{"not burst user data", `want "#burst-userdata v1"`}},
		{"cloud-config", "#cloud-config\npackages: [x]\n", []string{"not burst user data", `"#cloud-config"`}},
		{"future version", "#burst-userdata v2\n{}", []string{"unsupported burst user-data version 2", "reads version 1"}},
		{"bad version", "#burst-userdata vX\n{}", []string{"malformed header"}},
		{"not json", Header + "\nnode_name=x\n", []string{"decoding user data JSON"}},
		{"unknown field", Header + "\n" + strings.Replace(body, `"cluster"`, `"clutser":"x","cluster"`, 1), []string{`unknown field "clutser"`}},
		{"trailing", Header + "\n" + body + "{}", []string{"trailing data"}},
		{"all missing", Header + "\n{}", []string{
			"node_name: missing", "cluster: missing", "issued_at: missing", "slurm.controllers: missing",
			"munge.key_source: missing", "fsx.dns_name: missing", "fsx.mount_name: missing", "fsx.mount_point: missing",
			"fsx.checkpoint_root: missing", "agent.sizer_url: missing"}},
		{"too big", Header + "\n" + strings.Repeat(" ", MaxSize), []string{"exceeds EC2's 16384-byte limit"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc))
			if err == nil {
				t.Fatal("Decode accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	_, err = Decode([]byte("#burst-userdata v7\n{}"))
	var uv *UnsupportedVersionError
	if !errors.As(err, &uv) || uv.Version != 7 {
		t.Fatalf("want UnsupportedVersionError{7}, got %v", err)
	}
	_, err = Decode([]byte("#!/bin/bash\necho hi"))
	if !errors.Is(err, ErrNotBurstUserData) {
		t.Fatalf("want ErrNotBurstUserData, got %v", err)
	}
}

func TestValidateFields(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*UserData)
		want string
	}{
		{"node name with space", func(u *UserData) { u.NodeName = "gpu 1" }, "node_name:"},
		{"node name shell", func(u *UserData) { u.NodeName = "gpu-1;reboot" }, "node_name:"},
		{"node name command subst", func(u *UserData) { u.NodeName = "$(id)" }, "node_name:"},
		{"cluster leading dash", func(u *UserData) { u.Cluster = "-lab" }, "cluster:"},
		{"controller option injection", func(u *UserData) { u.Slurm.Controllers = []string{"--help"} }, "slurm.controllers[0]"},
		{"controller ipv6", func(u *UserData) { u.Slurm.Controllers = []string{"fe80::1"} }, "IPv6"},
		{"controller empty", func(u *UserData) { u.Slurm.Controllers = []string{"a", ""} }, "slurm.controllers[1]: empty"},
		{"port", func(u *UserData) { u.Slurm.Port = 70000 }, "slurm.port"},
		{"conf mode", func(u *UserData) { u.Slurm.ConfMode = "nfs" }, "slurm.conf_mode"},
		{"conf path without file mode", func(u *UserData) { u.Slurm.ConfPath = "/etc/slurm/slurm.conf" }, "slurm.conf_path: set with conf_mode"},
		{"configless with moved munge socket", func(u *UserData) { u.Munge.Socket = "/tmp/m.sock" }, "default socket"},
		{"file mode without path", func(u *UserData) { u.Slurm.ConfMode = ConfFile }, "slurm.conf_path: missing"},
		{"relative conf path", func(u *UserData) { u.Slurm.ConfMode = ConfFile; u.Slurm.ConfPath = "etc/slurm.conf" }, "slurm.conf_path"},
		{"dotdot conf path", func(u *UserData) { u.Slurm.ConfMode = ConfFile; u.Slurm.ConfPath = "/etc/../x" }, "not a clean"},
		{"key source literal", func(u *UserData) { u.Munge.KeySource = "c2VjcmV0" }, "munge.key_source"},
		{"key source ssm", func(u *UserData) { u.Munge.KeySource = "arn:aws:ssm:us-east-1:123456789012:parameter/x" }, "not a Secrets Manager"},
		{"key source relative file", func(u *UserData) { u.Munge.KeySource = "file://key" }, "munge.key_source"},
		{"key path quote", func(u *UserData) { u.Munge.KeyPath = "/etc/munge/'k'" }, "munge.key_path"},
		{"socket newline", func(u *UserData) {
			u.Slurm.ConfMode, u.Slurm.ConfPath = ConfFile, "/etc/slurm/slurm.conf"
			u.Munge.Socket = "/run/m\nx"
		}, "munge.socket"},
		{"dns name", func(u *UserData) { u.FSx.DNSName = "fs-1.fsx amazonaws.com" }, "fsx.dns_name"},
		{"mount name long", func(u *UserData) { u.FSx.MountName = "abcdefghi" }, "fsx.mount_name"},
		{"mount point root", func(u *UserData) { u.FSx.MountPoint = "/"; u.FSx.CheckpointRoot = "/ckpt" }, "fsx.mount_point"},
		{"checkpoint outside", func(u *UserData) { u.FSx.CheckpointRoot = "/fsxother/ckpt" }, "not inside fsx.mount_point"},
		{"sizer scheme", func(u *UserData) { u.Agent.SizerURL = "ftp://x" }, "scheme must be http"},
		{"sizer userinfo", func(u *UserData) { u.Agent.SizerURL = "http://a:b@x" }, "user:password"},
		{"sizer space", func(u *UserData) { u.Agent.SizerURL = "http://x/ y" }, "agent.sizer_url"},
		{"imds quote", func(u *UserData) { u.Agent.IMDSEndpoint = "http://x/'" }, "agent.imds_endpoint"},
		{"credential short", func(u *UserData) { u.Agent.Credential = "abc" }, "agent.credential"},
		{"credential space", func(u *UserData) { u.Agent.Credential = "abcdefgh ijklmnopq" }, "agent.credential"},
		{"interval", func(u *UserData) { u.Agent.ReportInterval = Duration(2 * time.Hour) }, "agent.report_interval"},
		{"test dir empty", func(u *UserData) { u.Test = &Test{} }, "test.local_fs_dir: missing"},
		{"no credential", func(u *UserData) { u.Agent.Credential = "" }, "agent.credential: missing"},
		{"node name and nodes", func(u *UserData) { u.Nodes = []NodeEntry{{"gpu-2", "tok_0123456789abcdef"}} }, "nodes: set together with node_name"},
		{"fleet with shared credential", func(u *UserData) {
			u.NodeName = ""
			u.Nodes = []NodeEntry{{"gpu-2", "tok_0123456789abcdef"}}
		}, "agent.credential: set in a fleet document"},
		{"fleet duplicate", func(u *UserData) {
			u.NodeName, u.Agent.Credential = "", ""
			u.Nodes = []NodeEntry{{"gpu-2", "tok_0123456789abcdef"}, {"gpu-2", "tok_0123456789abcdeg"}}
		}, `nodes[1].name: "gpu-2" listed twice`},
		{"fleet entry without credential", func(u *UserData) {
			u.NodeName, u.Agent.Credential = "", ""
			u.Nodes = []NodeEntry{{"gpu-2", "tok_0123456789abcdef"}, {"gpu-3", ""}}
		}, "nodes[1].credential: missing"},
		{"fleet entry bad name", func(u *UserData) {
			u.NodeName, u.Agent.Credential = "", ""
			u.Nodes = []NodeEntry{{"gpu 2", "tok_0123456789abcdef"}}
		}, "nodes[0].name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := valid()
			c.mod(&u)
			_, err := Encode(u)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if len(ve.Problems) != 1 {
				t.Fatalf("want exactly one problem, got %q", ve.Problems)
			}
		})
	}
}

func fleet() UserData {
	u := valid()
	u.NodeName, u.Agent.Credential = "", ""
	u.Nodes = []NodeEntry{{"gpu-1", "tok_1111111111111111"}, {"gpu-2", "tok_2222222222222222"}, {"gpu-3", "tok_3333333333333333"}}
	return u
}

func TestFleetDocument(t *testing.T) {
	b, err := Encode(fleet())
	if err != nil {
		t.Fatal(err)
	}
	u, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := u.ForNode("gpu-2")
	if err != nil {
		t.Fatal(err)
	}
	if got.NodeName != "gpu-2" || got.Agent.Credential != "tok_2222222222222222" || got.Nodes != nil {
		t.Fatalf("ForNode(gpu-2) = %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("resolved document does not validate: %v", err)
	}
	if _, err := u.ForNode("gpu-9"); err == nil || !strings.Contains(err.Error(), `node "gpu-9", which the user data's fleet (gpu-1,gpu-2,gpu-3) does not list`) {
		t.Fatalf("ForNode(gpu-9): %v", err)
	}
	if _, err := u.ForNode(""); err == nil || !strings.Contains(err.Error(), "node name is needed") {
		t.Fatalf("ForNode(\"\"): %v", err)
	}
	single := valid()
	if r, err := single.ForNode(""); err != nil || r.NodeName != "gpu-1" {
		t.Fatalf("single ForNode(\"\"): %+v %v", r, err)
	}
	if r, err := single.ForNode("gpu-1"); err != nil || r.Agent.Credential != single.Agent.Credential {
		t.Fatalf("single ForNode(gpu-1): %+v %v", r, err)
	}
	if _, err := single.ForNode("gpu-2"); err == nil || !strings.Contains(err.Error(), `user data is for node "gpu-1", but this instance is node "gpu-2"`) {
		t.Fatalf("single ForNode(gpu-2): %v", err)
	}
	// A fleet of 100 nodes with 64-character credentials still fits EC2's limit.
	big := fleet()
	big.Nodes = nil
	for i := 0; i < 100; i++ {
		big.Nodes = append(big.Nodes, NodeEntry{fmt.Sprintf("gpu-%d", i), strings.Repeat("a", 60) + fmt.Sprintf("%04d", i)})
	}
	if b, err := Encode(big); err != nil {
		t.Fatalf("100-node fleet: %v", err)
	} else {
		t.Logf("100-node fleet document: %d bytes of %d", len(b), MaxSize)
	}
}

// The sizer's node tokens are "bn1:<node>:<hex HMAC>".
func TestSizerNodeTokenAccepted(t *testing.T) {
	u := valid()
	u.Agent.Credential = "bn1:gpu-1:" + strings.Repeat("0a", 32)
	if _, err := Encode(u); err != nil {
		t.Fatal(err)
	}
}

func TestCredentialNotEchoed(t *testing.T) {
	u := valid()
	u.Agent.Credential = "secret with space 123456"
	_, err := Encode(u)
	if err == nil || strings.Contains(err.Error(), "secret with space") {
		t.Fatalf("credential leaked into error or accepted: %v", err)
	}
}

func TestEncodeTooBig(t *testing.T) {
	u := valid()
	u.Test = &Test{LocalFSDir: "/" + strings.Repeat("a", MaxSize)}
	_, err := Encode(u)
	if err == nil || !strings.Contains(err.Error(), "16384-byte limit") {
		t.Fatalf("want size error, got %v", err)
	}
}

// shellSafe is the set of bytes any decoded value may contain (URLs add a
// few more below); none of them is special to sh outside quotes except '#', '=' and '~'
// at word start, which cannot start a value that passed validation.
const shellMeta = " \t\n\r'\"`$;&|<>()\\*!{}"

func FuzzDecode(f *testing.F) {
	good, err := Encode(valid())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	if fb, err := Encode(fleet()); err == nil {
		f.Add(fb)
	}
	f.Add([]byte("#burst-userdata v1\n{}"))
	f.Add([]byte("#burst-userdata v2\n{}"))
	f.Add([]byte("#cloud-config\n"))
	f.Add([]byte(strings.Replace(string(good), "gpu-1", "gpu-1;id", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := Decode(data)
		if err != nil {
			return
		}
		// Anything accepted must re-encode and decode to the same value.
		b, err := Encode(u)
		if err != nil {
			t.Fatalf("decoded document does not re-encode: %v", err)
		}
		u2, err := Decode(b)
		if err != nil {
			t.Fatalf("re-encoded document does not decode: %v", err)
		}
		if !reflect.DeepEqual(u.Slurm, u2.Slurm) || u.NodeName != u2.NodeName || u.FSx != u2.FSx || u.Agent != u2.Agent ||
			!reflect.DeepEqual(u.Nodes, u2.Nodes) {
			t.Fatalf("re-encoding changed the document")
		}
		// No accepted value carries a shell metacharacter.
		vals := []string{u.NodeName, u.Cluster, u.Slurm.ConfPath, u.Munge.KeySource, u.Munge.KeyPath, u.Munge.Socket,
			u.FSx.DNSName, u.FSx.MountName, u.FSx.MountPoint, u.FSx.CheckpointRoot, u.Agent.SizerURL, u.Agent.IMDSEndpoint,
			u.Agent.Credential}
		vals = append(vals, u.Slurm.Controllers...)
		for _, n := range u.Nodes {
			vals = append(vals, n.Name, n.Credential)
		}
		if u.Test != nil {
			vals = append(vals, u.Test.LocalFSDir)
		}
		for _, v := range vals {
			if strings.ContainsAny(v, shellMeta) {
				t.Fatalf("accepted value %q contains a shell metacharacter", v)
			}
			if strings.HasPrefix(v, "-") {
				t.Fatalf("accepted value %q could be taken for an option", v)
			}
		}
	})
}
