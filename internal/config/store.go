package config

import (
	"fmt"
	"net/url"
	"strings"
)

// SizerStore chooses burst-sizer's database: SQLite in sizer.state_dir
// (the default, one head node) or a PostgreSQL that several sizers share.
type SizerStore struct {
	// Driver is sqlite (default) or postgres.
	Driver string `yaml:"driver"`
	// URL (postgres) is a postgres:// URL or a key=value DSN, without the
	// password.
	URL string `yaml:"url"`
	// PasswordFile (postgres) holds the password on one line, mode 0600.
	PasswordFile string `yaml:"password_file"`
	// TLS (postgres): how the connection is encrypted and verified.
	TLS StoreTLS `yaml:"tls"`
	// MaxConns bounds the connection pool (postgres; default 8).
	MaxConns int `yaml:"max_conns"`
}

// StoreTLS is the PostgreSQL connection's TLS.
type StoreTLS struct {
	// Mode: disable, require (encrypted, unverified) or verify-full (the
	// server's certificate against ca_file or the system roots, and its
	// host name); empty: what the URL's sslmode says.
	Mode     string `yaml:"mode"`
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"` // client certificate, with key_file
	KeyFile  string `yaml:"key_file"`
}

func (v *validator) store() {
	for i, u := range v.c.Sizer.URLs {
		if p, err := url.Parse(u); err != nil || p.Scheme != "https" || p.Host == "" {
			v.add(fmt.Sprintf("sizer.urls[%d]", i), "%q is not an https:// URL of a sizer", u)
		}
	}
	if len(v.c.Sizer.URLs) > 0 && v.c.Sizer.Store.Driver != "postgres" {
		v.add("sizer.urls", "more sizers need one database they share: set sizer.store.driver: postgres (on SQLite one sizer runs)")
	}
	s := v.c.Sizer.Store
	switch s.Driver {
	case "", "sqlite":
		if s.URL != "" || s.PasswordFile != "" || s.TLS != (StoreTLS{}) || s.MaxConns != 0 {
			v.add("sizer.store", "url, password_file, tls and max_conns apply to driver postgres only; set sizer.store.driver: postgres or remove them")
		}
		return
	case "postgres":
	default:
		v.add("sizer.store.driver", "%q: want sqlite (the default) or postgres", s.Driver)
		return
	}
	switch {
	case s.URL == "":
		v.add("sizer.store.url", "required with driver postgres: a postgres://host:5432/burst URL or a key=value DSN")
	case strings.HasPrefix(s.URL, "postgres://") || strings.HasPrefix(s.URL, "postgresql://"):
		u, err := url.Parse(s.URL)
		if err != nil || u.Host == "" && u.Query().Get("host") == "" {
			v.add("sizer.store.url", "is not a postgres://host/database URL")
		} else if _, has := u.User.Password(); has {
			v.add("sizer.store.url", "holds a password: move it to sizer.store.password_file (mode 0600) and remove it from the URL")
		}
	case strings.Contains(s.URL, "="):
		for _, kv := range strings.Fields(s.URL) {
			if strings.HasPrefix(strings.ToLower(kv), "password=") {
				v.add("sizer.store.url", "holds a password: move it to sizer.store.password_file (mode 0600) and remove password= from the DSN")
			}
		}
	default:
		v.add("sizer.store.url", "is neither a postgres:// URL nor a key=value DSN")
	}
	v.abs("sizer.store.password_file", s.PasswordFile, false)
	switch s.TLS.Mode {
	case "", "disable", "require", "verify-full":
	default:
		v.add("sizer.store.tls.mode", "%q: want disable, require or verify-full", s.TLS.Mode)
	}
	v.abs("sizer.store.tls.ca_file", s.TLS.CAFile, false)
	v.abs("sizer.store.tls.cert_file", s.TLS.CertFile, false)
	v.abs("sizer.store.tls.key_file", s.TLS.KeyFile, false)
	if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
		v.add("sizer.store.tls", "cert_file and key_file go together: set both or neither")
	}
	if s.MaxConns < 0 || s.MaxConns > 1000 {
		v.add("sizer.store.max_conns", "%d is outside 0..1000 (0: the default, 8)", s.MaxConns)
	}
}
