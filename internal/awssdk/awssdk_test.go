package awssdk

import (
	"context"
	"testing"
)

func TestLoad(t *testing.T) {
	cfg, err := Load(context.Background(), Options{Region: "eu-west-1", StaticCredentials: true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" {
		t.Errorf("region %q, want eu-west-1", cfg.Region)
	}
	if got := cfg.Retryer().MaxAttempts(); got != 3 {
		t.Errorf("max attempts %d, want 3", got)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "burst-emulator" {
		t.Errorf("static credentials: %+v, %v; want the emulator's dummy key", creds, err)
	}
}

func TestBaseEndpoint(t *testing.T) {
	if (Options{}).BaseEndpoint() != nil {
		t.Error("no endpoint must leave the region's endpoint (nil)")
	}
	if e := (Options{Endpoint: "http://127.0.0.1:9"}).BaseEndpoint(); e == nil || *e != "http://127.0.0.1:9" {
		t.Errorf("BaseEndpoint = %v, want the override", e)
	}
}
