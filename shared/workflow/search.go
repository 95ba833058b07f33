package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// A workflow may declare fields of its orders searchable (search:
// [customerId, region.code]): Submission keeps each order's value of each
// (shared/statestore, an index item per field) so that sasctl list --field
// and the console find the orders of a value by reading only them.

// MaxSearchFields is the most fields a workflow declares searchable: each
// is one more item in an order's submission transaction (two write units).
const MaxSearchFields = 8

// MaxSearchPathBytes bounds a searchable field's path, which is part of its
// index items' key.
const MaxSearchPathBytes = 64

// searchPathRE is a searchable field's path: names joined by dots, each a
// letter or _ then letters, digits or _.
var searchPathRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// search reads the file's search: list.
func (r *specReader) search(fields []string) []string {
	if len(fields) > MaxSearchFields {
		r.add("search", "%d fields: a workflow declares at most %d searchable", len(fields), MaxSearchFields)
	}
	seen := map[string]bool{}
	for i, f := range fields {
		switch {
		case len(f) > MaxSearchPathBytes || !searchPathRE.MatchString(f):
			r.add(fmt.Sprintf("search[%d]", i), "%q: a searchable field is a path of the order such as customerId or region.code (names joined by dots, at most %d bytes)", f, MaxSearchPathBytes)
		case seen[f]:
			r.add(fmt.Sprintf("search[%d]", i), "%q is declared searchable twice", f)
		}
		seen[f] = true
	}
	return fields
}

// searchExprs are the searchable fields as expressions reading the order,
// checked against its schema as every other one is.
func (d Definition) searchExprs() []orderExpr {
	out := make([]orderExpr, 0, len(d.Search))
	for i, f := range d.Search {
		if !searchPathRE.MatchString(f) {
			continue // reported by search
		}
		out = append(out, orderExpr{field: fmt.Sprintf("search[%d]", i), src: f, jq: ".order." + f,
			null: "an order without it is not found by it"})
	}
	return out
}

// SearchValues are order's values of the workflow's searchable fields, by
// field: a string as it is, a number or a boolean as its JSON text. A field
// the order lacks, or whose value is null, an object or an array, has none
// (an order is found by the values it has).
func (d Definition) SearchValues(order json.RawMessage) map[string]string {
	if len(d.Search) == 0 {
		return nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(order))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return nil
	}
	out := map[string]string{}
	for _, f := range d.Search {
		if v, ok := searchValue(doc, f); ok {
			out[f] = v
		}
	}
	return out
}

// searchValue is doc's value at path, as SearchValues keeps it.
func searchValue(doc any, path string) (string, bool) {
	for name := range strings.SplitSeq(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return "", false
		}
		doc = m[name]
	}
	switch v := doc.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return fmt.Sprint(v), true
	}
	return "", false
}
