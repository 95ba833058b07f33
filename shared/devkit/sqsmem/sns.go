package sqsmem

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// topic is an SNS topic whose subscribers are queues served here.
type topic struct {
	arn  string
	subs []subscription
}

// subscription is an SQS subscription of a topic.
type subscription struct {
	arn, queueARN string
	raw           bool // RawMessageDelivery: the message alone, not SNS's JSON envelope
}

// serveSNS answers the SNS calls (query protocol) the alerts make:
// CreateTopic, Subscribe (protocol sqs) and Publish.
func (s *Server) serveSNS(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeSNSError(w, "InvalidParameter", "cannot read the form: "+err.Error())
		return
	}
	action := r.PostForm.Get("Action")
	var result any
	var err error
	switch action {
	case "CreateTopic":
		result = s.createTopic(r)
	case "Subscribe":
		result, err = s.subscribe(r)
	case "Publish":
		result, err = s.publish(r)
	case "":
		err = fmt.Errorf("no Action: SQS is served in its JSON protocol only (X-Amz-Target: AmazonSQS.*), SNS in its query protocol")
	default:
		err = fmt.Errorf("the action %q is not served in process (SNS: only CreateTopic, Subscribe and Publish)", action)
		if operations[action] != nil {
			err = fmt.Errorf("SQS's %s in the query protocol is not served in process: use a client that speaks SQS's JSON protocol (AWS SDK for Go v2, a 2024 or later boto3 or AWS CLI)", action)
		}
	}
	if err != nil {
		writeSNSError(w, "InvalidParameter", err.Error())
		return
	}
	type response struct {
		XMLName   xml.Name
		Xmlns     string `xml:"xmlns,attr"`
		Result    any
		RequestID string `xml:"ResponseMetadata>RequestId"`
	}
	b, _ := xml.Marshal(response{XMLName: xml.Name{Local: action + "Response"}, Xmlns: "http://sns.amazonaws.com/doc/2010-03-31/",
		Result: result, RequestID: newID()})
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(b)
}

func writeSNSError(w http.ResponseWriter, code, msg string) {
	type errorResponse struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Type    string   `xml:"Error>Type"`
		Code    string   `xml:"Error>Code"`
		Message string   `xml:"Error>Message"`
	}
	b, _ := xml.Marshal(errorResponse{Type: "Sender", Code: code, Message: msg})
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

func (s *Server) createTopic(r *http.Request) any {
	arn := "arn:aws:sns:" + s.region(r) + ":" + s.opts.Account + ":" + r.PostForm.Get("Name")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topics[arn] == nil {
		s.topics[arn] = &topic{arn: arn}
	}
	return struct {
		XMLName  xml.Name `xml:"CreateTopicResult"`
		TopicArn string
	}{TopicArn: arn}
}

func (s *Server) subscribe(r *http.Request) (any, error) {
	f := r.PostForm
	if f.Get("Protocol") != "sqs" {
		return nil, fmt.Errorf("protocol %q is not served in process (only sqs)", f.Get("Protocol"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[f.Get("TopicArn")]
	if t == nil {
		return nil, fmt.Errorf("topic %s does not exist", f.Get("TopicArn"))
	}
	sub := subscription{arn: t.arn + ":" + newID(), queueARN: f.Get("Endpoint")}
	for i := 1; f.Has(fmt.Sprintf("Attributes.entry.%d.key", i)); i++ {
		if f.Get(fmt.Sprintf("Attributes.entry.%d.key", i)) == "RawMessageDelivery" {
			sub.raw = f.Get(fmt.Sprintf("Attributes.entry.%d.value", i)) == "true"
		}
	}
	t.subs = append(t.subs, sub)
	return struct {
		XMLName         xml.Name `xml:"SubscribeResult"`
		SubscriptionArn string
	}{SubscriptionArn: sub.arn}, nil
}

// publish delivers the message to every queue subscribed (a queue gone
// since is skipped, as SNS drops what it cannot deliver).
func (s *Server) publish(r *http.Request) (any, error) {
	f := r.PostForm
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[f.Get("TopicArn")]
	if t == nil {
		return nil, fmt.Errorf("topic %s does not exist", f.Get("TopicArn"))
	}
	id := newID()
	attrs := map[string]attrValue{}
	for i := 1; f.Has(fmt.Sprintf("MessageAttributes.entry.%d.Name", i)); i++ {
		p := fmt.Sprintf("MessageAttributes.entry.%d.", i)
		v := attrValue{DataType: f.Get(p + "Value.DataType")}
		if sv := f.Get(p + "Value.StringValue"); sv != "" {
			v.StringValue = &sv
		}
		attrs[f.Get(p+"Name")] = v
	}
	for _, sub := range t.subs {
		q := s.byARN(sub.queueARN)
		if q == nil {
			continue
		}
		body, mattrs := f.Get("Message"), attrs
		if !sub.raw {
			body, mattrs = envelope(id, t.arn, f.Get("Subject"), f.Get("Message"), s.opts.Now()), nil
		}
		now := s.opts.Now()
		q.add(&message{id: newID(), body: body, attrs: mattrs, sender: s.opts.SenderID, sent: now, visibleAt: now,
			attrsMD5: attrsMD5(mattrs)})
	}
	return struct {
		XMLName   xml.Name `xml:"PublishResult"`
		MessageId string
	}{MessageId: id}, nil
}

// envelope is SNS's JSON notification around a message.
func envelope(id, topicARN, subject, msg string, now time.Time) string {
	b, _ := json.Marshal(map[string]string{"Type": "Notification", "MessageId": id, "TopicArn": topicARN,
		"Subject": subject, "Message": msg, "Timestamp": now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"SignatureVersion": "1", "UnsubscribeURL": "http://" + strings.TrimPrefix(topicARN, "arn:") + "/unsubscribe"})
	return string(b)
}
