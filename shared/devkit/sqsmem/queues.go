package sqsmem

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var queueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (s *Server) createQueue(r *http.Request, body []byte) (any, error) {
	var in struct {
		QueueName  string
		Attributes map[string]string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if strings.HasSuffix(in.QueueName, ".fifo") || in.Attributes["FifoQueue"] == "true" {
		return nil, invalidParameter("FIFO queues are not served in process (use moto)")
	}
	if !queueName.MatchString(in.QueueName) {
		return nil, invalidParameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	if q, ok := s.queues[in.QueueName]; ok {
		for k, v := range in.Attributes {
			if q.attrs[k] != v {
				return nil, &apiError{code: codeQueueExists, msg: "A queue already exists with the same name and a different value for attribute " + k}
			}
		}
		return map[string]string{"QueueUrl": s.queueURL(r, q.name)}, nil
	}
	arn := "arn:aws:sqs:" + s.region(r) + ":" + s.opts.Account + ":" + in.QueueName
	q := newQueue(in.QueueName, arn, s.queueURL(r, in.QueueName), now)
	if err := q.setAttrs(in.Attributes, now); err != nil {
		return nil, err
	}
	s.queues[q.name] = q
	return map[string]string{"QueueUrl": s.queueURL(r, q.name)}, nil
}

func (s *Server) getQueueURL(r *http.Request, body []byte) (any, error) {
	var in struct{ QueueName string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[in.QueueName]; !ok {
		return nil, errNoQueue
	}
	return map[string]string{"QueueUrl": s.queueURL(r, in.QueueName)}, nil
}

func (s *Server) deleteQueue(_ *http.Request, body []byte) (any, error) {
	return onQueue(s, body, func(q *queue, _ queueRef) (any, error) {
		q.purge()
		q.signal() // its long polls answer at once
		delete(s.queues, q.name)
		return struct{}{}, nil
	})
}

func (s *Server) purgeQueue(_ *http.Request, body []byte) (any, error) {
	return onQueue(s, body, func(q *queue, _ queueRef) (any, error) { q.purge(); return struct{}{}, nil })
}

func (s *Server) listQueues(r *http.Request, body []byte) (any, error) {
	var in struct {
		QueueNamePrefix string
		MaxResults      int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var urls []string
	for _, name := range slices.Sorted(maps.Keys(s.queues)) {
		if strings.HasPrefix(name, in.QueueNamePrefix) {
			urls = append(urls, s.queueURL(r, name))
		}
	}
	if in.MaxResults > 0 && len(urls) > in.MaxResults {
		urls = urls[:in.MaxResults]
	}
	return map[string][]string{"QueueUrls": urls}, nil
}

func (s *Server) setQueueAttributes(_ *http.Request, body []byte) (any, error) {
	type input struct {
		queueRef
		Attributes map[string]string
	}
	return onQueue(s, body, func(q *queue, in input) (any, error) {
		if err := q.setAttrs(in.Attributes, s.opts.Now()); err != nil {
			return nil, err
		}
		q.signal() // a shorter delay or wait may let a long poll answer sooner
		return struct{}{}, nil
	})
}

func (s *Server) getQueueAttributes(_ *http.Request, body []byte) (any, error) {
	type input struct {
		queueRef
		AttributeNames []string
	}
	return onQueue(s, body, func(q *queue, in input) (any, error) {
		all := q.allAttrs(s.opts.Now(), s.chaos)
		out := map[string]string{}
		for _, n := range in.AttributeNames {
			if n == "All" {
				maps.Copy(out, all)
				continue
			}
			v, ok := all[n]
			if !ok {
				if _, known := settable[n]; !known && !readOnly[n] {
					return nil, &apiError{code: codeInvalidAttributeName, msg: "Unknown Attribute " + n + "."}
				}
				continue // a settable attribute never set (RedrivePolicy, Policy)
			}
			out[n] = v
		}
		if len(out) == 0 {
			return struct{}{}, nil
		}
		return map[string]map[string]string{"Attributes": out}, nil
	})
}

// readOnly are the attributes SQS computes.
var readOnly = map[string]bool{"QueueArn": true, "ApproximateNumberOfMessages": true,
	"ApproximateNumberOfMessagesNotVisible": true, "ApproximateNumberOfMessagesDelayed": true,
	"CreatedTimestamp": true, "LastModifiedTimestamp": true}

// allAttrs are the queue's attributes, the computed ones included.
func (q *queue) allAttrs(now time.Time, c *chaos) map[string]string {
	out := maps.Clone(q.attrs)
	visible, inFlight, delayed := c.depths(q, now)
	out["QueueArn"] = q.arn
	out["ApproximateNumberOfMessages"] = strconv.Itoa(visible)
	out["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inFlight)
	out["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	out["CreatedTimestamp"] = strconv.FormatInt(q.created.Unix(), 10)
	out["LastModifiedTimestamp"] = strconv.FormatInt(q.modified.Unix(), 10)
	return out
}
