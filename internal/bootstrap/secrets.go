package bootstrap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"

	"github.com/burst-hpc/burst/internal/imds"
)

// secretsClient calls Secrets Manager GetSecretValue (JSON 1.1 protocol,
// SigV4) with the standard library and the SDK's signer, so the node image
// does not need the whole service client for one call.
type secretsClient struct {
	endpoint string // default https://secretsmanager.<region>.amazonaws.com
	region   string
	creds    aws.CredentialsProvider
	http     *http.Client
}

func instanceRoleCredentials(imdsEndpoint string) aws.CredentialsProvider {
	return aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) {
		o.Client = imds.New(imds.Options{Endpoint: imdsEndpoint, Timeout: 5 * time.Second, Retry: true}).SDK()
	}))
}

// getSecretValue returns the secret's bytes: SecretBinary as is, or
// SecretString base64-decoded (a munge key is binary).
func getSecretValue(ctx context.Context, c secretsClient, arn string) ([]byte, error) {
	endpoint := c.endpoint
	if endpoint == "" {
		endpoint = "https://secretsmanager." + c.region + ".amazonaws.com"
	}
	hc := c.http
	if hc == nil {
		hc = &http.Client{Timeout: 20 * time.Second}
	}
	body, err := json.Marshal(map[string]string{"SecretId": arn})
	if err != nil {
		return nil, err
	}
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting credentials for Secrets Manager (does the instance profile exist?): %w", err)
	}
	var last error
	for attempt := 1; attempt <= 3; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(endpoint, "/")+"/", bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("building GetSecretValue request: %w", err)
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "secretsmanager", c.region, time.Now()); err != nil {
			return nil, fmt.Errorf("signing GetSecretValue: %w", err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
		} else {
			data, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch {
			case rerr != nil:
				last = rerr
			case resp.StatusCode == http.StatusOK:
				return decodeSecret(data, arn)
			case resp.StatusCode >= 500 || resp.StatusCode == 429:
				last = fmt.Errorf("HTTP %d: %s", resp.StatusCode, awsErrorText(data))
			default:
				return nil, fmt.Errorf("getting munge key %s from Secrets Manager: HTTP %d: %s (the instance role needs secretsmanager:GetSecretValue on it)",
					arn, resp.StatusCode, awsErrorText(data))
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("getting munge key %s from Secrets Manager after 3 attempts: %w", arn, last)
}

func decodeSecret(data []byte, arn string) ([]byte, error) {
	var out struct {
		SecretBinary []byte  `json:"SecretBinary"` // base64 in JSON
		SecretString *string `json:"SecretString"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding GetSecretValue response for %s: %w", arn, err)
	}
	if len(out.SecretBinary) > 0 {
		return out.SecretBinary, nil
	}
	if out.SecretString != nil {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*out.SecretString))
		if err != nil {
			return nil, fmt.Errorf("secret %s: SecretString is not base64 (store the munge key as SecretBinary or base64 text): %w", arn, err)
		}
		return key, nil
	}
	return nil, fmt.Errorf("secret %s has neither SecretBinary nor SecretString", arn)
}

func awsErrorText(data []byte) string {
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
		Msg2    string `json:"Message"`
	}
	if json.Unmarshal(data, &e) == nil && e.Type != "" {
		return strings.TrimSpace(e.Type + " " + e.Message + e.Msg2)
	}
	return lastLines(data, 1)
}
