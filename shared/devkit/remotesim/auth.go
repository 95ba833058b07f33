package remotesim

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Guard checks a call's credentials: nil lets it through; an error answers
// 401, and the call has no effect.
type Guard func(r *http.Request, body []byte) error

// Guard sets how a service checks its callers (nil: it lets anyone in).
func (s *Simulator) Guard(service string, g Guard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guards == nil {
		s.guards = map[string]Guard{}
	}
	s.guards[service] = g
}

func (s *Simulator) guardOf(service string) Guard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.guards[service]
}

// RequireHeader is a Guard for a service that wants header to hold value
// (an API key, "Bearer " and a token). Its error never says the value.
func RequireHeader(header, value string) Guard {
	return func(r *http.Request, _ []byte) error {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(header)), []byte(value)) != 1 {
			return fmt.Errorf("%s is missing or wrong", header)
		}
		return nil
	}
}

// RequireSigV4 is a Guard for an IAM-authorised service: the call must be
// signed with creds for service in region, as API Gateway checks it. It
// signs the headers the caller says it signed again, at the caller's time,
// and compares the signatures.
func RequireSigV4(creds aws.Credentials, service, region string) Guard {
	signer := v4.NewSigner()
	return func(r *http.Request, body []byte) error {
		auth := r.Header.Get("Authorization")
		signed, ok := signedHeaders(auth)
		if !ok || !strings.Contains(auth, "Credential="+creds.AccessKeyID+"/") {
			return errors.New("no SigV4 signature of the expected credentials")
		}
		at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if err != nil {
			return errors.New("no X-Amz-Date")
		}
		sum := sha256.Sum256(body)
		hash := hex.EncodeToString(sum[:])
		if r.Header.Get("X-Amz-Content-Sha256") != hash {
			return errors.New("the body is not the one signed")
		}
		again, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
		if err != nil {
			return err
		}
		again.ContentLength = r.ContentLength
		for _, h := range signed {
			if h != "host" && h != "content-length" {
				again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
			}
		}
		if err := signer.SignHTTP(context.Background(), creds, again, hash, service, region, at); err != nil {
			return err
		}
		if subtle.ConstantTimeCompare([]byte(again.Header.Get("Authorization")), []byte(auth)) != 1 {
			return errors.New("the SigV4 signature does not match")
		}
		return nil
	}
}

// signedHeaders are the headers a SigV4 Authorization header says it signed.
func signedHeaders(auth string) ([]string, bool) {
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return nil, false
	}
	for _, part := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "SignedHeaders="); ok {
			return strings.Split(v, ";"), true
		}
	}
	return nil, false
}
