package chaos

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/workflow"
)

// Searchable fields (Plan.Search): each generated and flow shape declares
// some of searchFields searchable (none, one or all of them, as the seed
// chooses), every flow shape its orders' customerId too; the orders of
// those shapes carry values from each field's small pool (or lack it), so
// that a value is shared by many orders; at the end (and before each bulk
// action) the judge searches each value and must find every order that
// carries it on a workflow that declares it, and no other (searchcheck.go).

// searchField is a field the run's orders may carry, declared searchable by
// some of its workflows, and the values an order carries of it.
type searchField struct {
	path   string
	values []any // as the order carries them: strings, numbers, booleans
}

// longestSearchPath is the longest path a workflow accepts
// (workflow.MaxSearchPathBytes).
var longestSearchPath = "l" + strings.Repeat("o", workflow.MaxSearchPathBytes-2) + "g"

// longestSearchValue is the longest value kept as it is
// (keyname.MaxKeyBytes), made of what encoders change: control bytes, <,
// &, quotes, two-byte runes (as TestTheLongestFieldAndValueAreFound's); one
// byte more is kept by its hash.
var longestSearchValue = func() string {
	const unit = "\x01<&\"é" // 6 bytes
	return strings.Repeat(unit, keyname.MaxKeyBytes/len(unit)) + strings.Repeat("x", keyname.MaxKeyBytes%len(unit))
}()

// searchFields are the fields the generated and flow shapes declare some
// of: a string of plain and escaped values, a number, a boolean, a nested
// path, and the longest path with values at and over the longest kept as
// it is.
var searchFields = []searchField{
	{"region", []any{"north", "south", "east <&\"\x01é/= x"}},
	{"tier", []any{1, 2, 3}},
	{"vip", []any{true, false}},
	{"account.code", []any{"acc-1", "acc-2"}},
	{longestSearchPath, []any{longestSearchValue, longestSearchValue + "y"}},
}

// customerField is the field every flow shape declares searchable: its
// orders' customer (Plan.customerOf: a few hot ones, many cold ones,
// hostile keys of 141 to 400 bytes in a hostile run).
const customerField = "customerId"

// searchCarried is the share of a shape's orders that carry a value of
// each field of searchFields; the others lack it (not found by it).
const searchCarried = 0.8

// searchText is value as a search names it (workflow.Definition.SearchValues:
// a string as it is, a number or a boolean as its JSON text).
func searchText(value any) string {
	switch v := value.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	}
	panic(fmt.Sprintf("a searchable value of type %T", value))
}

// searchOf is what shape k of its kind (flow: a flow shape) declares
// searchable, the same for a seed: none, some or all of searchFields (a
// stream of its own: the shapes are as they were), and a flow shape its
// customerId first.
func (p Plan) searchOf(k int, flow bool) []string {
	if !p.Search {
		return nil
	}
	stream := uint64(0x5ea<<32 | k)
	var out []string
	if flow {
		stream |= 0xf10 << 16
		out = append(out, customerField)
	}
	rng := rand.New(rand.NewPCG(p.Seed, stream))
	for _, i := range rng.Perm(len(searchFields))[:rng.IntN(len(searchFields)+1)] {
		out = append(out, searchFields[i].path)
	}
	return out
}

// carriesSearch reports whether order id carries values of searchFields:
// it runs on a generated or a flow shape.
func (p Plan) carriesSearch(id string) bool {
	wf := p.workflowOf(id)
	return p.Search && (strings.HasPrefix(wf, "shape") || strings.HasPrefix(wf, "flow"))
}

// searchValues are the values of searchFields order id carries, by path
// (none if it does not: carriesSearch).
func (p Plan) searchValues(id string) map[string]any {
	if !p.carriesSearch(id) {
		return nil
	}
	out := map[string]any{}
	for _, f := range searchFields {
		if remotesim.Mix(p.Seed, "search", f.path, id) < searchCarried {
			out[f.path] = f.values[int(remotesim.Mix(p.Seed, "search-value", f.path, id)*float64(len(f.values)))]
		}
	}
	return out
}

// withSearchValues is order body (a JSON object) with order id's values of
// searchFields as members (a path's names nested), <, > and & raw.
func (p Plan) withSearchValues(id, body string) string {
	values := p.searchValues(id)
	if len(values) == 0 {
		return body
	}
	members := map[string]any{}
	for path, v := range values {
		at := members
		names := strings.Split(path, ".")
		for _, name := range names[:len(names)-1] {
			next, ok := at[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[name] = next
			}
			at = next
		}
		at[names[len(names)-1]] = v
	}
	more, err := hostile.Marshal(members)
	if err != nil {
		panic(err) // strings, numbers and booleans always marshal
	}
	return strings.TrimSuffix(body, "}") + "," + strings.TrimPrefix(more, "{")
}

// searchKey is a search by a field's value.
type searchKey struct{ Field, Value string }

func (k searchKey) String() string {
	return fmt.Sprintf("%s=%s", shortField(k.Field), clip(fmt.Sprintf("%q", k.Value), 40))
}

// shortField is field as the run prints it: the longest path by its ends
// and its length.
func shortField(field string) string {
	if len(field) <= 24 {
		return field
	}
	return fmt.Sprintf("%s…%s(%d bytes)", field[:4], field[len(field)-2:], len(field))
}

// searchedFields are the fields the run's workflows declare searchable, by
// workflow.
func (p Plan) searchedFields() map[string][]string {
	out := map[string][]string{}
	for _, d := range p.workflows().Definitions() {
		if len(d.Search) > 0 {
			out[d.Name] = d.Search
		}
	}
	return out
}

// carried is what order id carries of field ("", false: nothing), as a
// search names it.
func (p Plan) carried(id, field string) (string, bool) {
	if field == customerField {
		if !strings.HasPrefix(p.workflowOf(id), "flow") {
			return "", false
		}
		return p.customerOf(id), true
	}
	v, ok := p.searchValues(id)[field]
	if !ok {
		return "", false
	}
	return searchText(v), true
}

// searchExpected are, for each search the judge makes, the orders of ids
// it must find: those that carry the value on a workflow that declares its
// field (declared: Plan.searchedFields). Every value of searchFields of a
// field some workflow declares, and one no order carries, is searched; of
// the customers, the first maxCustomerSearches met.
func (p Plan) searchExpected(ids []string, declared map[string][]string) map[searchKey][]string {
	out := map[searchKey][]string{}
	fields := map[string]bool{}
	for _, fs := range declared {
		for _, f := range fs {
			fields[f] = true
		}
	}
	for _, f := range searchFields {
		if fields[f.path] {
			for _, v := range append(slices.Clone(f.values), "none-such") {
				out[searchKey{f.path, searchText(v)}] = nil
			}
		}
	}
	customers := 0
	for _, id := range ids {
		for _, f := range declared[p.workflowOf(id)] {
			v, ok := p.carried(id, f)
			if !ok {
				continue
			}
			k := searchKey{f, v}
			if _, searched := out[k]; !searched && f == customerField && customers < maxCustomerSearches {
				customers++
				out[k] = nil
			}
			if _, searched := out[k]; searched {
				out[k] = append(out[k], id)
			}
		}
	}
	return out
}

// maxCustomerSearches bounds the customers the judge searches (a cold one
// has one order, a hot one many): a search each.
const maxCustomerSearches = 60

// searchedKeys are expected's searches, sorted.
func searchedKeys(expected map[searchKey][]string) []searchKey {
	return slices.SortedFunc(maps.Keys(expected), func(a, b searchKey) int {
		return strings.Compare(a.Field+"\x00"+a.Value, b.Field+"\x00"+b.Value)
	})
}
