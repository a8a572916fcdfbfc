package userdata

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testCA is a CA certificate as `burst-sizer tls init` makes one.
var testCA = func() string {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(4e9, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}()

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
			SizerURL:       "https://10.0.0.2:8080",
			SizerCA:        testCA,
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
			if !bytes.HasPrefix(b, []byte("#burst-userdata v2\n{")) {
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
 "agent":{"sizer_url":"https://10.0.0.2:8080","sizer_ca":` + strconv.Quote(testCA) + `}}
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
		{"empty", "", []string{"not burst user data", `want "#burst-userdata v2"`}},
		{"cloud-config", "#cloud-config\npackages: [x]\n", []string{"not burst user data", `"#cloud-config"`}},
		{"future version", "#burst-userdata v3\n{}", []string{"unsupported burst user-data version 3", "reads version 2"}},
		{"version 1 (node credentials in user data)", "#burst-userdata v1\n{}", []string{"unsupported burst user-data version 1"}},
		{"bad version", "#burst-userdata vX\n{}", []string{"malformed header"}},
		{"not json", Header + "\nnode_name=x\n", []string{"decoding user data JSON"}},
		{"unknown field", Header + "\n" + strings.Replace(body, `"cluster"`, `"clutser":"x","cluster"`, 1), []string{`unknown field "clutser"`}},
		{"trailing", Header + "\n" + body + "{}", []string{"trailing data"}},
		{"all missing", Header + "\n{}", []string{
			"cluster: missing", "issued_at: missing", "slurm.controllers: missing",
			"munge.key_source: missing", "fsx.dns_name: missing", "fsx.mount_name: missing", "fsx.mount_point: missing",
			"fsx.checkpoint_root: missing", "agent.sizer_url: missing", "agent.sizer_ca: missing"}},
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
		{"sizer plain http", func(u *UserData) { u.Agent.SizerURL = "http://x:8472" }, "https only"},
		{"sizer userinfo", func(u *UserData) { u.Agent.SizerURL = "https://a:b@x" }, "user:password"},
		{"sizer space", func(u *UserData) { u.Agent.SizerURL = "https://x/ y" }, "agent.sizer_url"},
		{"sizer urls plain http", func(u *UserData) { u.Agent.SizerURLs = []string{"https://b:8472", "http://c:8472"} }, "agent.sizer_urls[1]"},
		{"sizer urls too many", func(u *UserData) { u.Agent.SizerURLs = slices.Repeat([]string{"https://b:8472"}, 9) }, "agent.sizer_urls: 9 sizers"},
		{"imds quote", func(u *UserData) { u.Agent.IMDSEndpoint = "http://x/'" }, "agent.imds_endpoint"},
		{"sizer ca not pem", func(u *UserData) { u.Agent.SizerCA = "hello" }, "agent.sizer_ca"},
		{"sizer ca is a key", func(u *UserData) {
			u.Agent.SizerCA = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
		}, "never a key"},
		{"sizer ca missing", func(u *UserData) { u.Agent.SizerCA = "" }, "agent.sizer_ca: missing"},
		{"interval", func(u *UserData) { u.Agent.ReportInterval = Duration(2 * time.Hour) }, "agent.report_interval"},
		{"test dir empty", func(u *UserData) { u.Test = &Test{} }, "test.local_fs_dir: missing"},
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

func TestForNode(t *testing.T) {
	fleet := valid()
	fleet.NodeName = ""
	b, err := Encode(fleet)
	if err != nil {
		t.Fatal(err)
	}
	u, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := u.ForNode("gpu-2"); err != nil || got.NodeName != "gpu-2" {
		t.Fatalf("fleet ForNode(gpu-2) = %+v %v", got, err)
	}
	if _, err := u.ForNode(""); err == nil {
		t.Fatal("ForNode(\"\") accepted")
	}
	single := valid()
	if r, err := single.ForNode("gpu-1"); err != nil || r.NodeName != "gpu-1" {
		t.Fatalf("single ForNode(gpu-1): %+v %v", r, err)
	}
	if _, err := single.ForNode("gpu-2"); err == nil || !strings.Contains(err.Error(), `written for node "gpu-1", but the sizer says this instance is node "gpu-2"`) {
		t.Fatalf("single ForNode(gpu-2): %v", err)
	}
}

// Nothing secret: a document carries no field that could hold a
// credential, and an old document with one is refused.
func TestNoCredentialInUserData(t *testing.T) {
	b, err := Encode(valid())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"credential", "token", "bn1:", "bn2:", "PRIVATE KEY"} {
		if bytes.Contains(b, []byte(w)) {
			t.Errorf("user data contains %q:\n%s", w, b)
		}
	}
	old := strings.Replace(string(b), `"sizer_url"`, `"credential":"bn2:i-0123456789abcdef0:gpu-1:1:`+strings.Repeat("0", 64)+`","sizer_url"`, 1)
	if _, err := Decode([]byte(old)); err == nil || !strings.Contains(err.Error(), `unknown field "credential"`) {
		t.Fatalf("a document with a credential: %v", err)
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
	f.Add([]byte("#burst-userdata v1\n{}"))
	f.Add([]byte("#burst-userdata v2\n{}"))
	f.Add([]byte("#burst-userdata v3\n{}"))
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
		if !reflect.DeepEqual(u.Slurm, u2.Slurm) || u.NodeName != u2.NodeName || u.FSx != u2.FSx || !reflect.DeepEqual(u.Agent, u2.Agent) {
			t.Fatalf("re-encoding changed the document")
		}
		// No accepted value carries a shell metacharacter.
		vals := []string{u.NodeName, u.Cluster, u.Slurm.ConfPath, u.Munge.KeySource, u.Munge.KeyPath, u.Munge.Socket,
			u.FSx.DNSName, u.FSx.MountName, u.FSx.MountPoint, u.FSx.CheckpointRoot, u.Agent.SizerURL, u.Agent.IMDSEndpoint}
		vals = append(vals, u.Slurm.Controllers...)
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
