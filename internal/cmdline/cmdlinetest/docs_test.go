package cmdlinetest

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
)

func TestDocCommands(t *testing.T) {
	text := "Run `sudo burst-x serve --listen :1` then\n```sh\nburst-x check --strict | tee log   # a comment\n/usr/local/bin/burst-x --version\n```\nnot burst-x-filter, nor `burst-xyz run`.\n"
	got := DocCommands(text, "burst-x")
	want := []string{"serve --listen :1", "check --strict", "--version"}
	if len(got) != len(want) {
		t.Fatalf("DocCommands = %q, want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], " ") != want[i] {
			t.Errorf("command %d = %q, want %q", i, got[i], want[i])
		}
	}
	app := &cli.App{Name: "burst-x", Flags: []cli.Flag{cmdline.ConfigFlag()}, Commands: []*cli.Command{
		{Name: "serve", Flags: []cli.Flag{&cli.StringFlag{Name: "listen"}}},
		{Name: "check", Flags: []cli.Flag{&cli.BoolFlag{Name: "strict"}}},
	}}
	cmdline.AddVersion(app)
	for _, c := range []struct {
		line, err string
	}{
		{"serve --listen :1", ""},
		{"--config /etc/burst.yaml check --strict", ""},
		{"-c x.yaml serve --listen=:1", ""},
		{"--version", ""},
		{"version", ""},
		{"serve --port 1", "burst-x serve: no flag --port"},
		{"chekc", `burst-x: no command "chekc"`},
	} {
		err := CheckDocCommand(app, strings.Fields(c.line))
		if (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("%q: %v, want %q", c.line, err, c.err)
		}
	}
}
