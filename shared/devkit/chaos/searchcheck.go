package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/topology"
)

// SearchFigures are what the run's searches by a searchable field found.
type SearchFigures struct {
	// Fields counts the workflows that declare each field searchable;
	// Workflows those that declare one at least.
	Fields    map[string]int `json:"fields"`
	Workflows int            `json:"workflows"`
	// Searches are the searches the judge made at the end (each value of
	// each field declared, a value no order carries, customers), Found the
	// orders they found in all.
	Searches int `json:"searches"`
	Found    int `json:"found"`
	// MidRun are the searches made while the orders ran (before each bulk
	// action): every order stored by then found, none of another value.
	MidRun int `json:"midRun"`
}

// checkSearch compares, for each search, the orders it found with those
// it must find (expected): one missing, found for a value it does not
// carry, or found twice is a violation.
func checkSearch(expected, found map[searchKey][]string) []string {
	keys := slices.Collect(maps.Keys(expected))
	for k := range found {
		if _, ok := expected[k]; !ok {
			keys = append(keys, k)
		}
	}
	var bad []string
	for _, k := range keys {
		bad = append(bad, checkFound(k, expected[k], expected[k], found[k])...)
	}
	slices.Sort(bad)
	return bad
}

// checkFound compares what search k found with the orders it must find
// (must) and those it may (may: every order that carries its value):
// one of must missing, one found not of may, or one found twice is a
// violation.
func checkFound(k searchKey, must, may, found []string) []string {
	var bad []string
	carries, seen := map[string]bool{}, map[string]bool{}
	for _, id := range may {
		carries[id] = true
	}
	for _, id := range found {
		switch {
		case seen[id]:
			bad = append(bad, fmt.Sprintf("%s: order %s found twice", k, id))
		case !carries[id]:
			bad = append(bad, fmt.Sprintf("%s: order %s found, which does not carry it", k, id))
		}
		seen[id] = true
	}
	for _, id := range must {
		if !seen[id] {
			bad = append(bad, fmt.Sprintf("%s: order %s not found by a search for it", k, id))
		}
	}
	return bad
}

// searchAll makes each search of expected through the operator's own path
// (operator.Operator.Matching: the field's index, then the orders' state
// items), every page of it, and returns what each found.
func searchAll(ctx context.Context, op *operator.Operator, expected map[searchKey][]string) (map[searchKey][]string, error) {
	found := map[searchKey][]string{}
	for _, k := range searchedKeys(expected) {
		ids, err := searchIDs(ctx, op, operator.Search{Field: k.Field, Value: k.Value})
		if err != nil {
			return nil, err
		}
		found[k] = ids
	}
	return found, nil
}

// searchIDs are the ids of every page of the orders s finds, as found
// (an id twice if a page gives it twice).
func searchIDs(ctx context.Context, op *operator.Operator, s operator.Search) ([]string, error) {
	var out []string
	for next := ""; ; {
		ids, token, err := op.Matching(ctx, s, next)
		if err != nil {
			return nil, fmt.Errorf("search %s=%q: %w", s.Field, s.Value, err)
		}
		out = append(out, ids...)
		if token == "" {
			return out, nil
		}
		next = token
	}
}

// searchFigures counts the fields declared searchable by the run's
// workflows (declared).
func searchFigures(declared map[string][]string) *SearchFigures {
	f := &SearchFigures{Fields: map[string]int{}, Workflows: len(declared)}
	for _, fields := range declared {
		for _, field := range fields {
			f.Fields[field]++
		}
	}
	return f
}

// clearValues are the values a sealed run's tables must not hold in
// clear: those of searchFields and the customers of expected's searches
// long enough to tell (8 bytes or more: a shorter one, "north" or "2",
// may be part of anything).
func clearValues(expected map[searchKey][]string) []string {
	seen := map[string]bool{}
	for k := range expected {
		if len(k.Value) >= 8 && k.Value != "none-such" {
			seen[k.Value] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// inClear says which of values item holds in clear, in any string or
// binary attribute, at any depth ("": none), naming the item by its key.
func inClear(item map[string]types.AttributeValue, values []string) string {
	var texts []string
	var walk func(types.AttributeValue)
	walk = func(av types.AttributeValue) {
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			texts = append(texts, v.Value)
		case *types.AttributeValueMemberB:
			texts = append(texts, string(v.Value))
		case *types.AttributeValueMemberSS:
			texts = append(texts, v.Value...)
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				walk(x)
			}
		case *types.AttributeValueMemberM:
			for _, x := range v.Value {
				walk(x)
			}
		}
	}
	for _, av := range item {
		walk(av)
	}
	all := strings.Join(texts, "\xff")
	for _, v := range values {
		if strings.Contains(all, v) {
			return fmt.Sprintf("item %s/%s holds %s in clear", keyText(item, topology.KeyOrderID), keyText(item, topology.KeySort),
				clip(fmt.Sprintf("%q", v), 40))
		}
	}
	return ""
}

// keyText is item's string attribute name ("" if none).
func keyText(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return clip(fmt.Sprintf("%q", s.Value), 60)
	}
	return ""
}

// checkSearch makes, once the orders ended, every search the judge makes
// (Plan.searchExpected), through the operator's own path, and judges what
// each found; with the bulk operator's (bk, nil if none) searches made
// while the orders ran and its reports. In a sealed run it reads every
// item of both tables: none may hold a searchable value in clear.
func (r *Result) checkSearch(ctx context.Context, stack *localrun.Stack, p Plan, ids []string, bk *bulker) error {
	if !p.Search || !r.Checked {
		return nil
	}
	declared := p.searchedFields()
	expected := p.searchExpected(ids, declared)
	op := operator.New(stack.Deployment.Clients, stack.Topology())
	found, err := searchAll(ctx, op, expected)
	if err != nil {
		return err
	}
	r.Search = searchFigures(declared)
	r.Search.Searches = len(found)
	for _, f := range found {
		r.Search.Found += len(f)
	}
	r.Violations.Unfound = checkSearch(expected, found)
	if bk != nil {
		bk.mu.Lock()
		r.Search.MidRun = bk.midRun
		r.Violations.Unfound = append(r.Violations.Unfound, bk.unfound...)
		r.Violations.BulkReports = slices.Clone(bk.bad)
		bk.mu.Unlock()
	}
	if !p.Seal {
		return nil
	}
	clear, err := valuesInClear(ctx, stack, clearValues(expected))
	r.Violations.ClearCopies = append(r.Violations.ClearCopies, clear...)
	return err
}

// valuesInClear reads every item of the stack's tables, and says which
// hold one of values in clear (inClear).
func valuesInClear(ctx context.Context, stack *localrun.Stack, values []string) ([]string, error) {
	var out []string
	for _, table := range []string{stack.Topology().OrdersTable(), stack.Topology().StateTable()} {
		p := dynamodb.NewScanPaginator(stack.Deployment.Clients.DynamoDB, &dynamodb.ScanInput{TableName: &table})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("scan %s for searchable values in clear: %w", table, err)
			}
			for _, item := range page.Items {
				if why := inClear(item, values); why != "" {
					out = append(out, table+": "+why)
				}
			}
		}
	}
	return out, nil
}
