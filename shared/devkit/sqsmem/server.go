// Package sqsmem serves SQS queues from memory, in process: an http.Handler
// speaking SQS's JSON protocol (AmazonSQS.* targets, application/x-amz-json-1.0)
// for the operations the product and its tooling call, with the semantics
// they rely on: visibility timeouts and their changes, receive counts and
// redrive to a dead-letter queue, delays, batches of ten with partial
// failures, message and system attributes with their MD5s, long polls woken
// by a send, and the queue depths. It also serves the three SNS calls the
// alerts make (CreateTopic, Subscribe, Publish to an SQS subscription), so an
// alert reaches a queue served here.
//
// It is local tooling, not an SQS: no FIFO queues, no retention expiry, no
// permissions, no encryption, no message move tasks. shared/devkit/sqsconf
// runs one conformance suite against it and against moto, so the two do not
// drift.
package sqsmem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// MaxMessageSize is the largest message body a queue takes by default
// (SQS's MaximumMessageSize bound since 2025: 1 MiB; the product keeps its
// messages within 256 KB).
const MaxMessageSize = 1 << 20

// DefaultSenderID is the SenderId of every message: moto's, so tests that
// name a sender read the same on both.
const DefaultSenderID = "AIDAIT2UOQQY3AUEKVGXU"

// Options configure a server.
type Options struct {
	Account  string // the account id in queue URLs and ARNs (default 123456789012, moto's)
	Region   string // when a request's signature names none (default us-east-1)
	SenderID string // the SenderId of every message (default DefaultSenderID)
	// Now is the clock (default time.Now); long polls wait in real time.
	Now func() time.Time
	// Unkind, if set, makes the queues reorder, duplicate and report
	// approximate depths as SQS may (nil: exact order, exactly once,
	// exact depths).
	Unkind *Unkind
}

// Server is an in-memory SQS (and the SNS fan-out to it); the zero value is
// not usable: call New.
type Server struct {
	opts   Options
	mu     sync.Mutex
	queues map[string]*queue // by name
	topics map[string]*topic // by ARN
	seq    uint64
	chaos  *chaos // nil: kind queues
}

// New returns an empty server.
func New(o Options) *Server {
	if o.Account == "" {
		o.Account = "123456789012"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.SenderID == "" {
		o.SenderID = DefaultSenderID
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{opts: o, queues: map[string]*queue{}, topics: map[string]*topic{}, chaos: newChaos(o.Unkind)}
}

// ServeHTTP answers one SQS (JSON protocol) or SNS (query protocol) request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveSQS(w, r, target)
		return
	}
	s.serveSNS(w, r)
}

// Listening is a server bound to a loopback port.
type Listening struct {
	*Server
	Endpoint string // http://127.0.0.1:PORT
	http     *http.Server
	done     chan struct{}
}

// Listen serves a new server on 127.0.0.1 and a free port (or addr, if not
// empty) until Close.
func Listen(addr string, o Options) (*Listening, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return nil, fmt.Errorf("in-process SQS: listen on %q: only 127.0.0.1 is served", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("in-process SQS: %w", err)
	}
	l := &Listening{Server: New(o), Endpoint: "http://" + ln.Addr().String(), done: make(chan struct{})}
	l.http = &http.Server{Handler: l.Server, ReadHeaderTimeout: 10 * time.Second}
	go func() { defer close(l.done); _ = l.http.Serve(ln) }()
	return l, nil
}

// Close stops serving: long polls under way are answered empty.
func (l *Listening) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := l.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = l.http.Close() // long polls hold their connections
	}
	<-l.done
	if err != nil {
		return fmt.Errorf("in-process SQS: close: %w", err)
	}
	return nil
}

// newID returns a random UUID, the format of SQS's message ids.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80 // version 4, RFC 4122 variant
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

var credentialRegion = regexp.MustCompile(`Credential=[^/]+/[^/]+/([^/]+)/`)

// region is the region a request was signed for.
func (s *Server) region(r *http.Request) string {
	if m := credentialRegion.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	return s.opts.Region
}

// queueURL is a queue's URL as the request's host reaches it.
func (s *Server) queueURL(r *http.Request, name string) string {
	return "http://" + r.Host + "/" + s.opts.Account + "/" + name
}

// lookup finds a queue by its URL (its last path segment); s.mu is held.
func (s *Server) lookup(url string) (*queue, error) {
	name := url[strings.LastIndex(url, "/")+1:]
	if q, ok := s.queues[name]; ok && url != "" {
		return q, nil
	}
	return nil, errNoQueue
}

// byARN finds a queue by its ARN; s.mu is held.
func (s *Server) byARN(arn string) *queue {
	q := s.queues[arn[strings.LastIndex(arn, ":")+1:]]
	if q == nil || q.arn != arn {
		return nil
	}
	return q
}
