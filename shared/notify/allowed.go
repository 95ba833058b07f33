package notify

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Allowed is the deployment's list of allowed reply queues. Each entry is a
// queue URL whose last segment is a name prefix: with
// "https://sqs.us-east-1.amazonaws.com/123456789012/shop-client-", an order
// may name any queue of that endpoint and account whose name starts with
// "shop-client-". An entry that is a whole queue's URL allows that queue.
//
// Check compares parsed URLs, never strings: a replyQueue must have the
// entry's scheme, host and port, its account, and a queue name SQS allows,
// and nothing else (no userinfo, query, fragment, percent-escape, or path
// segment beyond account/name), so it cannot walk out of the prefix with
// "../", "%2e%2e" or "@host".
type Allowed []string

// MaxQueueURLBytes is the longest replyQueue accepted.
const MaxQueueURLBytes = 512

var (
	accountPattern = regexp.MustCompile(`^[0-9]{12}$`)
	// SQS: 1-80 letters, digits, hyphens and underscores; a FIFO queue's
	// name ends in .fifo, within the 80.
	queueNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	fifoNamePattern  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,75}\.fifo$`)
)

// queueURL is a queue URL's parts that decide where a message goes.
type queueURL struct {
	scheme, host, port, account, name string
}

// Check returns an error saying why queueURL may not be named, or nil.
func (a Allowed) Check(queueURL string) error {
	if len(a) == 0 {
		return fmt.Errorf("replyQueue %q is not allowed: this deployment allows no reply queues", truncate(queueURL))
	}
	q, err := parseQueueURL(queueURL)
	if err != nil {
		return fmt.Errorf("replyQueue %q is not allowed: %w", truncate(queueURL), err)
	}
	for _, entry := range a {
		if p, err := parseQueueURL(entry); err == nil && q.within(p) {
			return nil
		}
	}
	return fmt.Errorf("replyQueue %q is not allowed: it must be a queue of %s", truncate(queueURL), strings.Join(a, ", "))
}

// Validate checks that every entry is a queue URL with a name prefix.
func (a Allowed) Validate() error {
	for _, entry := range a {
		if _, err := parseQueueURL(entry); err != nil {
			return fmt.Errorf("allowed reply queue %q: %w", entry, err)
		}
	}
	return nil
}

// within reports whether q is a queue that entry p allows.
func (q queueURL) within(p queueURL) bool {
	return q.scheme == p.scheme && q.host == p.host && q.port == p.port &&
		q.account == p.account && strings.HasPrefix(q.name, p.name)
}

// parseQueueURL parses scheme://host[:port]/account/name, refusing anything
// that could make the URL mean another queue than it seems to.
func parseQueueURL(raw string) (queueURL, error) {
	switch {
	case len(raw) > MaxQueueURLBytes:
		return queueURL{}, fmt.Errorf("longer than %d bytes", MaxQueueURLBytes)
	case strings.ContainsAny(raw, "%\\@?#"):
		return queueURL{}, fmt.Errorf("a queue URL has no percent-escape, backslash, userinfo, query or fragment")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return queueURL{}, fmt.Errorf("not a URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Opaque != "" || u.Host == "" {
		return queueURL{}, fmt.Errorf("not an http(s) URL with a host")
	}
	q := queueURL{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: u.Port()}
	if q.port == "" {
		q.port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(segs) != 2 {
		return queueURL{}, fmt.Errorf("the path must be /ACCOUNT/QUEUE, nothing more")
	}
	q.account, q.name = segs[0], segs[1]
	switch {
	case !accountPattern.MatchString(q.account):
		return queueURL{}, fmt.Errorf("%q is not a 12-digit account id", truncate(q.account))
	case fifoNamePattern.MatchString(q.name):
		return queueURL{}, fmt.Errorf("a FIFO queue cannot be a reply queue: status messages carry no message group")
	case !queueNamePattern.MatchString(q.name):
		return queueURL{}, fmt.Errorf("%q is not a queue name (1-80 letters, digits, - or _)", truncate(q.name))
	}
	return q, nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
