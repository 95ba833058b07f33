package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Validation checks every path into the order a workflow's expressions
// read (a perKey key, a timer's until, an input, a forEach) against the
// order's schema: a path it cannot produce is an error; with no schema, a
// path cannot be checked and is a warning. A typo would otherwise read
// null at run time: a perKey key that bounds nothing, a timer that fails,
// an input its service gets without the field.

// orderExpr is an expression of the file that may read the order.
type orderExpr struct {
	field string // where it is written: steps[2].input
	src   string // as written
	jq    string // as run (a forEach's field name is .name)
	// forEach: the expression runs on the order, not on a step's document,
	// and gives an array.
	forEach bool
	alias   map[string]docPath // root fields standing for order paths (.item)
	null    string             // what a path the order lacks does there
}

// orderExprs are the definition's expressions that may read the order,
// sch (nil: none) the order's schema.
func (d Definition) orderExprs(sch *orderSchema) []orderExpr {
	var out []orderExpr
	for _, name := range sortedKeys(d.AgentSpecs) {
		if pk := d.AgentSpecs[name].PerKey; pk != nil && pk.Key != "" {
			out = append(out, orderExpr{field: "agents." + name + ".perKey.key", src: pk.Key, jq: pk.Key,
				null: "a null key bounds nothing"})
		}
	}
	for i, st := range d.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		var alias map[string]docPath
		if st.ForEach != "" {
			e := orderExpr{field: path + ".forEach", src: st.ForEach, jq: st.ForEach, forEach: true,
				null: "null is not an array: Submission refuses the order"}
			if forEachRE.MatchString(st.ForEach) {
				e.jq = "." + st.ForEach
			}
			out = append(out, e)
			alias = itemAlias(e.jq, sch)
		}
		if st.Input != "" {
			out = append(out, orderExpr{field: path + ".input", src: st.Input, jq: st.Input, alias: alias,
				null: "its service gets null"})
		}
		if st.Sleep != nil && st.Sleep.Until != "" {
			out = append(out, orderExpr{field: path + ".until", src: st.Sleep.Until, jq: st.Sleep.Until,
				null: "a null time fails the step"})
		}
		if st.Undo != nil && st.Undo.Input != "" {
			out = append(out, orderExpr{field: path + ".undo.input", src: st.Undo.Input, jq: st.Undo.Input, alias: alias,
				null: "its service gets null"})
		}
	}
	return out
}

// orderRoot is where a forEach runs: the order, .order of a document.
var orderRoot = docPath{{Field: "order"}}

// itemAlias maps .item, in the documents of a forEach step's records, to
// the element of the order's array it is: nil if the path is not known, or
// is one sch cannot produce (the forEach's problem, not its inputs').
func itemAlias(forEach string, sch *orderSchema) map[string]docPath {
	_, outs, err := readPaths(forEach, orderRoot, nil)
	if err != nil || len(outs) != 1 || len(outs[0]) == 0 || outs[0][0] != orderRoot[0] {
		return nil
	}
	if sch != nil && sch.cannot(outs[0][1:], true) != nil {
		return nil
	}
	return map[string]docPath{"item": outs[0].with(pathStep{Elem: true})}
}

// checkOrderReads checks every expression's paths into the order against
// the schema doc (nil: none, so each expression that reads a field of the
// order is a warning).
func (d Definition) checkOrderReads(doc json.RawMessage) Problems {
	var sch *orderSchema
	if doc != nil {
		var err error
		if sch, err = newOrderSchema(doc); err != nil {
			return Problems{{Field: "schema", What: err.Error()}}
		}
	}
	var ps Problems
	if idFieldRE.MatchString(d.IDMember()) {
		ps = d.checkIDField(sch)
	}
	for _, e := range append(d.orderExprs(sch), d.searchExprs()...) {
		ps = append(ps, e.check(sch)...)
	}
	return ps
}

// check checks the paths e reads against sch (nil: no schema).
func (e orderExpr) check(sch *orderSchema) Problems {
	in := docPath(nil)
	if e.forEach {
		in = orderRoot
	}
	reads, outs, err := readPaths(e.jq, in, e.alias)
	if err != nil {
		return nil // reported where it is compiled
	}
	paths := furthest(orderPaths(reads))
	if sch == nil {
		if len(paths) == 0 {
			return nil
		}
		return Problems{{Field: e.field, Warning: true, What: fmt.Sprintf(
			"reads %s unchecked: the workflow has no schema, and a field an order lacks is null (%s); declare the order's schema to check it",
			e.list(paths), e.null)}}
	}
	var ps Problems
	add := func(p docPath, wantArray bool) {
		r := sch.cannot(p, wantArray)
		if r == nil {
			return
		}
		what := e.subject(p) + ": " + r.explain(p, e.show)
		if !slices.ContainsFunc(ps, func(q Problem) bool { return q.What == what }) {
			ps = append(ps, Problem{Field: e.field, What: what})
		}
	}
	for _, p := range paths {
		add(p, false)
	}
	if e.forEach {
		for _, p := range orderPaths(outs) {
			add(p, true)
		}
	}
	return ps
}

// furthest are the paths of ps no other goes further than (a path the
// schema cannot produce, it cannot produce further either).
func furthest(ps []docPath) []docPath {
	var out []docPath
	for _, p := range ps {
		if !slices.ContainsFunc(ps, func(q docPath) bool { return q.hasPrefix(p) }) {
			out = append(out, p)
		}
	}
	return out
}

// orderPaths are the paths of ps into the order (.order.x...), without
// their .order; a read of the order itself, whole, is not one.
func orderPaths(ps []docPath) []docPath {
	var out []docPath
	for _, p := range ps {
		if len(p) > 1 && p.hasPrefix(orderRoot) {
			out = append(out, p[1:])
		}
	}
	return out
}

// show writes an order path as e's reader knows it: .order.x in a step's
// document, .x (the order: "the order") in a forEach.
func (e orderExpr) show(p docPath) string {
	switch {
	case !e.forEach:
		return slices.Concat(orderRoot, p).String()
	case len(p) == 0:
		return "the order"
	}
	return p.String()
}

// subject names what reads path p: a forEach as written, another
// expression by the path it reads.
func (e orderExpr) subject(p docPath) string {
	if e.forEach {
		return strconv.Quote(e.src)
	}
	return "reads " + e.show(p)
}

// list writes paths as e's reader knows them.
func (e orderExpr) list(ps []docPath) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = e.show(p)
	}
	return strings.Join(out, ", ")
}
