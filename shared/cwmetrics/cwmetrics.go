// Package cwmetrics sends the product's EMF documents (shared/metrics) to
// CloudWatch with PutMetricData: for the operator's tools (sasctl, its
// console, the typed client), which run outside Lambda, where no log is
// read for the metrics it carries. Each document's namespace, metric
// names, units, dimension sets and values are sent as they are, so a
// metric an operator's tool emits is the one a function emits: an order's
// end an operator makes counts in the dashboard and alarms that read the
// functions' (infra/stack). It imports no other package of the product.
package cwmetrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/sas-go/sas/shared/metrics"
)

// API is the part of the CloudWatch client a Publisher uses.
type API interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

// MaxData is how many metrics one PutMetricData request carries at most
// (CloudWatch's limit: 1,000).
const MaxData = 1000

// MaxValues is how many values one metric of a request carries at most
// (CloudWatch's limit: 150); an EMF document carries at most 100.
const MaxValues = 150

// Publisher is a writer of EMF lines (a metrics.Emitter's) that keeps them
// until Publish sends them. Safe for concurrent use.
type Publisher struct {
	api  API
	mu   sync.Mutex
	kept []byte
}

// New returns a publisher sending with api.
func New(api API) *Publisher { return &Publisher{api: api} }

// Write keeps p's EMF lines for the next Publish.
func (p *Publisher) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kept = append(p.kept, b...)
	return len(b), nil
}

// Publish sends the whole lines written since the last Publish, as
// PutMetricData requests of at most MaxData metrics of one namespace each,
// and forgets them whatever came of it (a metric is best effort). A line
// that is not an EMF document is skipped.
func (p *Publisher) Publish(ctx context.Context) error {
	p.mu.Lock()
	end := bytes.LastIndexByte(p.kept, '\n') + 1
	lines := p.kept[:end:end]
	p.kept = slices.Clone(p.kept[end:])
	p.mu.Unlock()
	byNS := map[string][]types.MetricDatum{}
	var order []string
	for _, line := range bytes.Split(lines, []byte("\n")) {
		for _, d := range Data(line) {
			if byNS[d.Namespace] == nil {
				order = append(order, d.Namespace)
			}
			byNS[d.Namespace] = append(byNS[d.Namespace], d.Datum)
		}
	}
	var errs []error
	for _, ns := range order {
		for batch := range slices.Chunk(byNS[ns], MaxData) {
			if _, err := p.api.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(ns), MetricData: batch}); err != nil {
				errs = append(errs, fmt.Errorf("put %d metrics in %s: %w", len(batch), ns, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Datum is one metric of an EMF document, under one of its dimension sets,
// in its namespace.
type Datum struct {
	Namespace string
	Datum     types.MetricDatum
}

// Data are the metrics an EMF document (one line) declares, as CloudWatch
// extracts them from a log: one per directive, dimension set and metric,
// each with the dimensions' values and the metric's values (a number or
// an array of them) from the document's members. None if line is not EMF.
func Data(line []byte) []Datum {
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
	}
	var members map[string]any
	if json.Unmarshal(line, &doc) != nil || json.Unmarshal(line, &members) != nil {
		return nil
	}
	var at *time.Time // none: CloudWatch's time of receipt
	if doc.AWS.Timestamp > 0 {
		at = aws.Time(time.UnixMilli(doc.AWS.Timestamp).UTC())
	}
	var out []Datum
	for _, dir := range doc.AWS.CloudWatchMetrics {
		for _, set := range dir.Dimensions {
			dims, ok := dimensions(set, members)
			if !ok {
				continue // as CloudWatch: a dimension with no value drops the set
			}
			for _, m := range dir.Metrics {
				for vs := range slices.Chunk(metrics.Values(members[m.Name]), MaxValues) {
					out = append(out, Datum{Namespace: dir.Namespace, Datum: types.MetricDatum{MetricName: aws.String(m.Name),
						Dimensions: dims, Values: vs, Unit: types.StandardUnit(m.Unit), Timestamp: at}})
				}
			}
		}
	}
	return out
}

// dimensions are the dimensions of set, their values the document's
// members; ok false if one has no text value.
func dimensions(set []string, members map[string]any) ([]types.Dimension, bool) {
	out := make([]types.Dimension, 0, len(set))
	for _, name := range set {
		v, ok := members[name].(string)
		if !ok || v == "" {
			return nil, false
		}
		out = append(out, types.Dimension{Name: aws.String(name), Value: aws.String(v)})
	}
	return out, true
}
