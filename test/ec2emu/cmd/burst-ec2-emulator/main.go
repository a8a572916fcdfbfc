// Command burst-ec2-emulator runs burst's EC2 emulator (test/ec2emu)
// standalone, for the demo and manual runs:
//
//	burst-ec2-emulator -listen 127.0.0.1:8787 -time-scale 10 \
//	    -subnets subnet-a=us-east-1a,subnet-b=us-east-1b \
//	    -launch-template burst-gpu=ami-0123 -capacity g5.xlarge/us-east-1a/spot=2 \
//	    -event-queue burst-interruptions -identity-cert-dir ./emu-certs \
//	    -on-start ./boot-node.sh -on-stop ./stop-node.sh
//
// Point the SDK at it with AWS_ENDPOINT_URL_EC2=http://127.0.0.1:8787 (and
// AWS_ENDPOINT_URL_SQS, the same URL) and any static credentials. The
// control API (/_emu/...) interrupts instances, changes capacity, powers
// instances off, reads the billing record and injects faults; see
// ec2emu.ControlPrefix. -identity-cert-dir writes rsa2048.pem and rsa.pem,
// the certificates of the identity document's rsa2048 and signature
// endpoints. -event-queue makes a queue the target of the EC2 EventBridge
// events. Hook commands run with BURST_EMU_INSTANCE_ID, BURST_EMU_IMDS_URL,
// BURST_EMU_PRIVATE_IP, BURST_EMU_INSTANCE_TYPE, BURST_EMU_ZONE,
// BURST_EMU_TAGS (JSON), BURST_EMU_STATE, BURST_EMU_STARTS and
// BURST_EMU_SHUTDOWN_URL (POST it to power the instance off, as the node's
// poweroff would) in their environment.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/test/ec2emu"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "burst-ec2-emulator:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("burst-ec2-emulator", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8787", "address of the EC2 API")
	region := fs.String("region", "us-east-1", "region")
	subnets := fs.String("subnets", "", "subnet=zone,... (default subnet-a, -b, -c in <region>a, b, c)")
	scale := fs.Float64("time-scale", 1, "emulated seconds per wall-clock second")
	latency := fs.Duration("latency", 0, "API latency (emulated)")
	boot := fs.Duration("boot-delay", 5*time.Second, "pending -> running (emulated)")
	shutdown := fs.Duration("shutdown-delay", 5*time.Second, "shutting-down -> terminated (emulated)")
	stopDelay := fs.Duration("stop-delay", 0, "stopping -> stopped (emulated; default the shutdown delay)")
	startDelay := fs.Duration("start-delay", 0, "pending -> running after StartInstances (emulated; default half the boot delay)")
	retention := fs.Duration("terminated-retention", time.Hour, "how long terminated instances stay visible (emulated; negative: forever)")
	notice := fs.Duration("notice-period", 2*time.Minute, "spot interruption notice period (emulated)")
	account := fs.String("account", ec2emu.DefaultAccount, "account id")
	indexes := fs.String("launch-indexes", "sequential", "fleet launch indexes: sequential, per-pool, collide or sparse")
	certDir := fs.String("identity-cert-dir", "", "write the identity document certificates (rsa2048.pem, rsa.pem) here")
	bucket := fs.Int("bucket-size", 1000, "launch token bucket size (-1 disables)")
	refill := fs.Float64("bucket-refill", 2, "launch tokens per emulated second")
	onStart := fs.String("on-start", "", "command run when an instance enters running")
	onStop := fs.String("on-stop", "", "command run when an instance leaves running")
	var caps, templates, queues multi
	fs.Var(&queues, "event-queue", "SQS queue that receives the EC2 EventBridge events, repeatable")
	fs.Var(&caps, "capacity", "type/zone/spot|on-demand=N, repeatable")
	fs.Var(&templates, "launch-template", "name=ami-id, an admin-made launch template with instance tags in metadata, repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := ec2emu.Options{Region: *region, Account: *account, TimeScale: *scale, Latency: *latency, BootDelay: *boot, ShutdownDelay: *shutdown,
		StopDelay: *stopDelay, StartDelay: *startDelay, TerminatedRetention: *retention, NoticePeriod: *notice,
		LaunchIndexes: ec2emu.LaunchIndexMode(*indexes), BucketSize: *bucket, BucketRefill: *refill, Logger: log}
	if *subnets != "" {
		opts.Subnets = map[string]string{}
		for _, kv := range strings.Split(*subnets, ",") {
			id, zone, ok := strings.Cut(kv, "=")
			if !ok || id == "" || zone == "" {
				return fmt.Errorf("-subnets: %q is not subnet=zone", kv)
			}
			opts.Subnets[id] = zone
		}
	}
	var srv *ec2emu.Server
	if *onStart != "" {
		opts.OnStart = func(in ec2emu.Instance) { hook(log, *onStart, in, srv.URL()) }
	}
	if *onStop != "" {
		opts.OnStop = func(in ec2emu.Instance) { hook(log, *onStop, in, srv.URL()) }
	}
	srv = ec2emu.New(opts)
	if err := srv.SetLaunchIndexes(opts.LaunchIndexes); err != nil {
		return fmt.Errorf("-launch-indexes: %w", err)
	}
	for _, q := range queues {
		if _, err := srv.AddEventRule(ec2emu.EventRule{Queue: q}); err != nil {
			return fmt.Errorf("-event-queue %s: %w", q, err)
		}
	}
	if *certDir != "" {
		if err := writeCerts(srv, *certDir); err != nil {
			return err
		}
	}
	for _, c := range caps {
		pool, n, ok := strings.Cut(c, "=")
		parts := strings.Split(pool, "/")
		count, err := strconv.Atoi(n)
		if !ok || len(parts) != 3 || err != nil || (parts[2] != "spot" && parts[2] != "on-demand") {
			return fmt.Errorf("-capacity: %q is not type/zone/spot|on-demand=N", c)
		}
		srv.SetCapacity(parts[0], parts[1], parts[2], count)
	}
	for _, t := range templates {
		name, ami, ok := strings.Cut(t, "=")
		if !ok || name == "" || ami == "" {
			return fmt.Errorf("-launch-template: %q is not name=ami-id", t)
		}
		srv.AddLaunchTemplate(ec2emu.LaunchTemplateSpec{Name: name, ImageID: ami, MetadataTags: true})
	}
	if err := srv.StartAddr(*listen); err != nil {
		return err
	}
	log.Info("EC2 emulator listening", "url", srv.URL(), "time_scale", *scale)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return srv.Close()
}

// writeCerts writes the identity certificates a verifier is configured with.
func writeCerts(srv *ec2emu.Server, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-identity-cert-dir: %w", err)
	}
	for file, kind := range map[string]string{"rsa2048.pem": ec2emu.IdentityRSA2048, "rsa.pem": ec2emu.IdentitySignature} {
		b, err := srv.IdentityCertPEMFor(kind)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, file), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("-identity-cert-dir: writing %s: %w", file, err)
		}
	}
	return nil
}

func hook(log *slog.Logger, command string, in ec2emu.Instance, base string) {
	tags, _ := json.Marshal(in.Tags)
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), "BURST_EMU_INSTANCE_ID="+in.ID, "BURST_EMU_IMDS_URL="+in.IMDSURL,
		"BURST_EMU_PRIVATE_IP="+in.PrivateIP, "BURST_EMU_INSTANCE_TYPE="+in.InstanceType, "BURST_EMU_ZONE="+in.Zone,
		"BURST_EMU_TAGS="+string(tags), "BURST_EMU_STATE="+in.State, "BURST_EMU_STARTS="+strconv.Itoa(in.Starts),
		"BURST_EMU_SHUTDOWN_URL="+base+ec2emu.ControlPrefix+"shutdown?id="+in.ID)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) || err != nil {
		log.Error("instance hook failed", "command", command, "instance", in.ID, "err", err, "output", string(out))
		return
	}
	log.Info("instance hook ran", "command", command, "instance", in.ID)
}
