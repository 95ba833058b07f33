package statestore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// An hour's counts item: Wf and Wv name the workflow version, Hr the hour
// (Unix ms); counters: n<State> the ends by state, u the undone, o<i> the
// orders' durations by bucket, a<k> the ends by hours since their start,
// s<i>/<step> each step's durations by bucket.
const (
	healthEnded   = "n"
	healthUndone  = "u"
	healthOrder   = "o"
	healthStarted = "a"
	healthStep    = "s"
)

// newHealthUpdate is the update that adds c to an hour's item.
func newHealthUpdate(c health.Counts, hour time.Time) *x.Builder {
	b := x.New()
	b.Set(b.Name("Wf"), b.String(c.Workflow))
	b.Set(b.Name("Wv"), b.String(c.Version))
	b.Set(b.Name("Hr"), b.Int(hour.UnixMilli()))
	b.Set(b.Name(topology.KeyExpires), b.Int(hour.Add(HealthKept).Unix()))
	for st, n := range c.Ended {
		b.Add(b.Name(healthEnded+string(st)), b.Int(n))
	}
	if c.Undone > 0 {
		b.Add(b.Name(healthUndone), b.Int(c.Undone))
	}
	for i, n := range c.Order {
		b.Add(b.Name(healthOrder+strconv.Itoa(i)), b.Int(n))
	}
	for k, n := range c.StartedAgo {
		b.Add(b.Name(healthStarted+strconv.Itoa(k)), b.Int(n))
	}
	for step, h := range c.Steps {
		for i, n := range h {
			b.Add(b.Name(healthStep+strconv.Itoa(i)+"/"+step), b.Int(n))
		}
	}
	return b
}

// Health reads the hours' counts from since's hour to now's, every
// workflow version's: one Query per hour and shard, each reading only that
// hour's items (one per workflow version that ended orders in it), so a
// day's view reads at most 25×HealthShards small partitions, whatever the
// number of orders.
func (s *Store) Health(ctx context.Context, since, now time.Time) ([]health.HourCounts, error) {
	var out []health.HourCounts
	for hour := health.Hour(since); !hour.After(now); hour = hour.Add(time.Hour) {
		for shard := range HealthShards {
			items, err := s.healthItems(ctx, healthPartition(hour, shard))
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				out = append(out, health.HourCounts{Hour: hour, Counts: healthCounts(it)})
			}
		}
	}
	return out, nil
}

// healthItems are the items of one hour's shard.
func (s *Store) healthItems(ctx context.Context, partition string) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{TableName: &s.state,
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": topology.KeyOrderID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(partition)}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read health %s: %w", partition, err)
		}
		out = append(out, page.Items...)
	}
	return out, nil
}

// healthCounts decodes an hour's item.
func healthCounts(item map[string]types.AttributeValue) health.Counts {
	var names struct{ Wf, Wv string }
	_ = attributevalue.UnmarshalMap(item, &names)
	c := health.NewCounts(names.Wf, names.Wv)
	for name, v := range item {
		nv, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(nv.Value, 10, 64)
		if err != nil {
			continue
		}
		addCounter(&c, name, n)
	}
	return c
}

// addCounter adds the counter named name to c (what it is, by its prefix).
func addCounter(c *health.Counts, name string, n int64) {
	switch {
	case name == healthUndone:
		c.Undone += n
	case strings.HasPrefix(name, healthEnded):
		c.Ended[workflow.State(name[len(healthEnded):])] += n
	case strings.HasPrefix(name, healthOrder):
		if i, err := strconv.Atoi(name[len(healthOrder):]); err == nil {
			c.Order[i] += n
		}
	case strings.HasPrefix(name, healthStarted):
		if k, err := strconv.Atoi(name[len(healthStarted):]); err == nil {
			c.StartedAgo[k] += n
		}
	case strings.HasPrefix(name, healthStep):
		i, step, ok := strings.Cut(name[len(healthStep):], "/")
		if b, err := strconv.Atoi(i); ok && err == nil {
			if c.Steps[step] == nil {
				c.Steps[step] = health.Histogram{}
			}
			c.Steps[step][b] += n
		}
	}
}
