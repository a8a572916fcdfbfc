package bootstrap

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

func TestGetSecretValue(t *testing.T) {
	key := []byte(strings.Repeat("k", 64))
	arn := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:burst/munge-AbCdEf"
	mode := "binary"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
			!strings.Contains(auth, "Credential=AKIDTEST/") || !strings.Contains(auth, "/eu-west-1/secretsmanager/aws4_request") {
			http.Error(w, `{"__type":"BadRequest","message":"bad signature or target"}`, 400)
			return
		}
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		if in["SecretId"] != arn {
			http.Error(w, `{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`, 400)
			return
		}
		switch mode {
		case "binary":
			json.NewEncoder(w).Encode(map[string]any{"ARN": arn, "SecretBinary": key})
		case "string":
			json.NewEncoder(w).Encode(map[string]any{"ARN": arn, "SecretString": base64.StdEncoding.EncodeToString(key)})
		case "denied":
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"AccessDeniedException","Message":"not authorized"}`)
		}
	}))
	defer srv.Close()
	c := secretsClient{endpoint: srv.URL, region: "eu-west-1", creds: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRET", "")}
	for _, m := range []string{"binary", "string"} {
		mode = m
		got, err := getSecretValue(context.Background(), c, arn)
		if err != nil || string(got) != string(key) {
			t.Fatalf("%s: got %q, %v", m, got, err)
		}
	}
	mode = "denied"
	_, err := getSecretValue(context.Background(), c, arn)
	if err == nil || !strings.Contains(err.Error(), "AccessDeniedException") || !strings.Contains(err.Error(), "secretsmanager:GetSecretValue") {
		t.Fatalf("want access denied with a hint, got %v", err)
	}
	_, err = getSecretValue(context.Background(), c, arn+"x")
	if err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("want not found, got %v", err)
	}
}
