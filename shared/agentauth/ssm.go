package agentauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// parameterReader reads an SSM SecureString parameter, decrypted, with one
// signed GetParameter call (the JSON 1.1 protocol: a POST with the action in
// X-Amz-Target). The SDK's SSM client would do the same and add 1.3 MB to an
// Agent's 9 MB binary, most of it the serializers of SSM's other 140
// operations; the one call is tested against moto like every other.
func parameterReader(cfg aws.Config, name string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		body, _ := json.Marshal(map[string]any{"Name": name, "WithDecryption": true})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ssmEndpoint(cfg), bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
		if cfg.Credentials == nil {
			return "", fmt.Errorf("no AWS credentials")
		}
		creds, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "ssm", cfg.Region, time.Now()); err != nil {
			return "", err
		}
		client := cfg.HTTPClient
		if client == nil {
			client = http.DefaultClient
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		return parameterValue(resp)
	}
}

// parameterValue reads GetParameter's answer: the value, or the service's
// error (its type and message: never a value).
func parameterValue(resp *http.Response) (string, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e)
		kind := e.Type[strings.LastIndex(e.Type, "#")+1:]
		return "", fmt.Errorf("ssm GetParameter: HTTP %d %s %s", resp.StatusCode, kind, e.Message)
	}
	var out struct {
		Parameter struct{ Value string }
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("ssm GetParameter: %w", err)
	}
	return out.Parameter.Value, nil
}

// ssmEndpoint is the configuration's endpoint (an emulator's), or the
// region's.
func ssmEndpoint(cfg aws.Config) string {
	if v := os.Getenv("AWS_ENDPOINT_URL_SSM"); v != "" {
		return strings.TrimSuffix(v, "/") + "/"
	}
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		return strings.TrimSuffix(*cfg.BaseEndpoint, "/") + "/"
	}
	if strings.HasPrefix(cfg.Region, "cn-") {
		return "https://ssm." + cfg.Region + ".amazonaws.com.cn/"
	}
	return "https://ssm." + cfg.Region + ".amazonaws.com/"
}
