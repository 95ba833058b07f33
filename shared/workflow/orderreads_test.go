package workflow_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// shop is an order's schema with closed objects, a $ref, an allOf, an
// array of closed items, a oneOf, open objects and optional fields.
const shop = `schema:
  type: object
  additionalProperties: false
  required: [orderId, customer, items]
  properties:
    orderId: {type: string}
    deliverAfter: {type: string}
    customer: {$ref: "#/$defs/customer"}
    items:
      type: array
      items:
        type: object
        additionalProperties: false
        properties: {sku: {type: string}, quantity: {type: integer}}
    notes: {type: object}
    gift: {type: object, properties: {message: {type: string}}}
    payment:
      oneOf:
        - {type: object, additionalProperties: false, properties: {card: {type: string}}}
        - {type: object, additionalProperties: false, properties: {iban: {type: string}}}
  $defs:
    customer:
      type: object
      additionalProperties: false
      required: [id]
      properties:
        id: {type: string}
        email: {type: string}
        address: {allOf: [{$ref: "#/$defs/address"}]}
    address: {type: object, additionalProperties: false, properties: {city: {type: string}}}
`

// exprs are a file's expressions that read the order, by field; a case
// changes one of them.
type exprs map[string]string

// shopFile is a workflow whose expressions are exprs (each field's default
// otherwise), with schema (a "schema:" block, or "" for none) at its end.
// Its lines: perKey.key 6, forEach 10, input 11, undo.input 12, until 14.
func shopFile(schema string, e exprs) []byte {
	get := func(field, def string) string {
		if v, ok := e[field]; ok {
			return v
		}
		return def
	}
	return fmt.Appendf(nil, `name: t
defaults: {timeout: 5s}
agents:
  a:
    endpoint: "https://a.example.com"
    perKey: {key: '%s'}
steps:
  - name: call
    agent: a
    forEach: '%s'
    input: '%s'
    undo: {name: uncall, input: '%s'}
  - name: later
    until: '%s'
%s`, get("perKey", ".order.customer.id"), get("forEach", "items"), get("input", "{orderId: .order.orderId, item: .item}"),
		get("undo", ".item.sku"), get("until", ".order.deliverAfter"), schema)
}

// only is the names the shop order allows at its top.
const only = "(only customer, deliverAfter, gift, items, notes, orderId, payment)"

// A path into the order that the schema cannot produce is a problem with
// its file:line and field; a path it can (nested, through a $ref, an
// array's items, an optional or open object) is none.
func TestOrderPathsAreCheckedAgainstTheSchema(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		e    exprs
		want string // "": valid
	}{
		"perKey typo":    {exprs{"perKey": ".order.customr.id"}, "t.yaml:6: agents.a.perKey.key: reads .order.customr.id: the schema allows no field customr in .order " + only},
		"until typo":     {exprs{"until": ".order.deliverAftr"}, "t.yaml:14: steps[1].until: reads .order.deliverAftr: the schema allows no field deliverAftr in .order " + only},
		"input typo":     {exprs{"input": "{id: .order.orderID}"}, "t.yaml:11: steps[0].input: reads .order.orderID: the schema allows no field orderID in .order " + only},
		"forEach typo":   {exprs{"forEach": ".itemz"}, `t.yaml:10: steps[0].forEach: ".itemz": the schema allows no field itemz in the order ` + only},
		"forEach object": {exprs{"forEach": "customer"}, `t.yaml:10: steps[0].forEach: "customer": the schema makes .customer an object, not an array`},
		"undo item typo": {exprs{"undo": "{sku: .item.skew}"}, "t.yaml:12: steps[0].undo.input: reads .order.items[].skew: the schema allows no field skew in .order.items[] (only quantity, sku)"},
		"through a $ref": {exprs{"perKey": ".order.customer.emial"}, "reads .order.customer.emial: the schema allows no field emial in .order.customer (only address, email, id)"},
		"$ref in allOf":  {exprs{"input": ".order.customer.address.zip"}, "the schema allows no field zip in .order.customer.address (only city)"},
		"array items":    {exprs{"input": "[.order.items[].skew]"}, "reads .order.items[].skew: the schema allows no field skew in .order.items[] (only quantity, sku)"},
		"an index":       {exprs{"input": ".order.items[0].qty"}, "reads .order.items[].qty: the schema allows no field qty in .order.items[]"},
		"array as field": {exprs{"input": ".order.items.sku"}, "reads .order.items.sku: the schema makes .order.items an array, not an object"},
		"field of text":  {exprs{"perKey": ".order.orderId.id"}, "reads .order.orderId.id: the schema makes .order.orderId a string, not an object"},
		"oneOf":          {exprs{"input": ".order.payment.cash"}, "the schema allows no field cash in .order.payment (only card, iban)"},
		"a variable":     {exprs{"input": ".order.customer as $c | {id: $c.id, n: $c.nme}"}, "reads .order.customer.nme: the schema allows no field nme in .order.customer"},
		"destructured":   {exprs{"input": ". as {order: {customer: $c}} | $c.nme"}, "reads .order.customer.nme: the schema allows no field nme in .order.customer"},
		"map":            {exprs{"input": ".order.items | map(.qty)"}, "reads .order.items[].qty: the schema allows no field qty in .order.items[]"},
		"reduce":         {exprs{"input": "reduce .order.items[] as $i (0; . + $i.qty)"}, "reads .order.items[].qty"},
		"a pipe":         {exprs{"perKey": ".order | select(.orderId != null) | .customer.idd"}, "reads .order.customer.idd"},
		"an alternative": {exprs{"perKey": ".order.customer.email // .order.customer.mail"}, "reads .order.customer.mail"},
		"interpolated":   {exprs{"perKey": `"\(.order.orderid)"`}, "reads .order.orderid"},
		"shorthand":      {exprs{"input": ".order | {orderId, customr}"}, "reads .order.customr"},
		"quoted field":   {exprs{"input": `.order["order-id"]`}, `reads .order["order-id"]: the schema allows no field order-id in .order`},
		"an if":          {exprs{"until": "if .order.gift then .order.deliverAftr else .order.deliverAfter end"}, "reads .order.deliverAftr"},

		"the defaults":       {exprs{}, ""},
		"nested":             {exprs{"perKey": ".order.customer.address.city"}, ""},
		"items":              {exprs{"input": "{skus: [.order.items[].sku], first: .order.items[0].quantity}"}, ""},
		"map of items":       {exprs{"input": ".order.items | map(.sku) | join(\",\")"}, ""},
		"optional":           {exprs{"input": ".order.gift.message"}, ""},
		"open object":        {exprs{"input": "{w: .order.gift.wrapping, n: .order.notes.any.depth}"}, ""},
		"either alternative": {exprs{"input": "{c: .order.payment.card, i: .order.payment.iban}"}, ""},
		"not the order":      {exprs{"input": "{r: .results.call.x.y, o: .order}"}, ""},
		"a computed key":     {exprs{"input": ".order[.results.call.field]"}, ""},
		"own function":       {exprs{"input": "def f: .nope; .order | f"}, ""},
		"sub's replacement":  {exprs{"perKey": `.order.orderId | sub("(?<x>o)"; "\(.x)")`}, ""},
		"sorted":             {exprs{"input": ".order.items | sort_by(.sku) | first | .quantity"}, ""},
		"forEach path":       {exprs{"forEach": ".items"}, ""},
		"a field it adds":    {exprs{"input": ".order | .discount = 10 | .customer.vip |= (. // false) | del(.notez)"}, ""},
		"what |= reads":      {exprs{"input": ".order.customer |= {id, nme}"}, "reads .order.customer.nme"},
	} {
		_, err := workflow.ParseFile("t.yaml", shopFile(shop, c.e), workflow.Options{})
		if c.want == "" {
			require.NoError(t, err, name)
			continue
		}
		require.Len(t, workflow.AsProblems(err), 1, "%s: %v", name, err)
		require.ErrorContains(t, err, c.want, name)
	}
}

// Without a schema, each expression that reads a field of the order is a
// warning (its line and field): the file is valid.
func TestOrderPathsWithoutASchemaAreWarnings(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("t.yaml", shopFile("", exprs{"perKey": ".order.customr.id", "undo": ".results.call"}), workflow.Options{})
	require.NoError(t, err)
	var got []string
	for _, w := range d.Warnings {
		require.True(t, w.Warning)
		got = append(got, w.String())
	}
	require.Equal(t, []string{
		"t.yaml:6: warning: agents.a.perKey.key: reads .order.customr.id unchecked: the workflow has no schema, and a field an order lacks is null (a null key bounds nothing); declare the order's schema to check it",
		"t.yaml:10: warning: steps[0].forEach: reads .items unchecked: the workflow has no schema, and a field an order lacks is null (null is not an array: Submission refuses the order); declare the order's schema to check it",
		"t.yaml:11: warning: steps[0].input: reads .order.orderId, .order.items[] unchecked: the workflow has no schema, and a field an order lacks is null (its service gets null); declare the order's schema to check it",
		"t.yaml:14: warning: steps[1].until: reads .order.deliverAfter unchecked: the workflow has no schema, and a field an order lacks is null (a null time fails the step); declare the order's schema to check it",
	}, got)

	// A file with problems keeps its warnings apart: its error has none.
	d, err = workflow.ParseFile("t.yaml", append(shopFile("", exprs{}), "deadline: soon\n"...), workflow.Options{})
	require.Len(t, workflow.AsProblems(err), 1)
	require.NotContains(t, err.Error(), "warning")
	require.Len(t, d.Warnings, 5)

	d, err = workflow.ParseFile("t.yaml", shopFile(shop, exprs{}), workflow.Options{})
	require.NoError(t, err)
	require.Empty(t, d.Warnings, "with a schema, every path is checked")
}

// The schema's other shapes: additional and pattern properties,
// unevaluatedProperties, a draft-07 $ref, an anchor, a tuple, a nullable
// object, a recursive schema and a $ref cycle.
func TestOrderPathsThroughEverySchemaShape(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ schema, read, want string }{
		"additional schema": {`{additionalProperties: {type: string}}`, ".order.x.y", "the schema makes .order.x a string, not an object"},
		"pattern":           {`{additionalProperties: false, patternProperties: {"^x-": {type: object}}}`, `.order["x-a"].b`, ""},
		"no pattern":        {`{additionalProperties: false, patternProperties: {"^x-": {}}}`, ".order.y", "the schema allows no field y in .order (none)"},
		"unevaluated":       {`{unevaluatedProperties: false, allOf: [{properties: {a: {}}}]}`, ".order.a", ""},
		"unevaluated typo":  {`{unevaluatedProperties: false, allOf: [{properties: {a: {}}}]}`, ".order.b", "the schema allows no field b in .order (only a)"},
		"draft-07": {`{$schema: "http://json-schema.org/draft-07/schema#", definitions: {c: {type: object, additionalProperties: false, properties: {a: {}}}},
  properties: {c: {$ref: "#/definitions/c"}}}`, ".order.c.b", "the schema allows no field b in .order.c (only a)"},
		"draft-07 ref's siblings": {`{$schema: "http://json-schema.org/draft-07/schema#", definitions: {c: {type: object, properties: {a: {}}}},
  properties: {c: {$ref: "#/definitions/c", additionalProperties: false}}}`, ".order.c.b", ""},
		"anchor":     {`{$defs: {c: {$anchor: cust, type: object, additionalProperties: false, properties: {id: {}}}}, properties: {c: {$ref: "#cust"}}}`, ".order.c.ib", "no field ib in .order.c (only id)"},
		"tuple":      {`{properties: {pair: {type: array, prefixItems: [{type: string}, {type: integer}], items: false}}}`, ".order.pair[0].x", "the schema makes .order.pair[] a string, not an object"},
		"no items":   {`{properties: {none: {type: array, items: false}}}`, ".order.none[0]", "the schema allows no element in .order.none"},
		"nullable":   {`{properties: {m: {type: [object, "null"], additionalProperties: false, properties: {x: {}}}}}`, ".order.m.x", ""},
		"text items": {`{properties: {tags: {type: array, items: {type: string}}}}`, ".order.tags[].x", "the schema makes .order.tags[] a string, not an object"},
		"not a list": {`{properties: {n: {type: integer}}}`, ".order.n[0]", "the schema makes .order.n an integer, not an array"},
		"false":      {`{properties: {gone: false}}`, ".order.gone", "the schema allows nothing at .order.gone"},
		"recursive":  {`{$ref: "#/$defs/node", $defs: {node: {type: object, additionalProperties: false, properties: {v: {}, child: {$ref: "#/$defs/node"}}}}}`, ".order.child.child.v", ""},
		"recursive typo": {`{$ref: "#/$defs/node", $defs: {node: {type: object, additionalProperties: false, properties: {v: {}, child: {$ref: "#/$defs/node"}}}}}`,
			".order.child.child.w", "the schema allows no field w in .order.child.child (only child, v)"},
		"allOf types": {`{properties: {c: {allOf: [{type: string}, {minLength: 1}]}}}`, ".order.c.x", "the schema makes .order.c a string, not an object"},
		"$id and pointer": {`{$id: "https://example.com/order.json", $defs: {"a/b": {type: object, additionalProperties: false, properties: {id: {}}}},
  properties: {c: {$ref: "https://example.com/order.json#/$defs/a~1b"}}}`, ".order.c.x", "the schema allows no field x in .order.c (only id)"},
		"draft-07 tuple": {`{$schema: "http://json-schema.org/draft-07/schema#", properties: {pair: {type: array, items: [{type: string}], additionalItems: false}}}`,
			".order.pair[1].x", "the schema makes .order.pair[] a string, not an object"},
		"a $ref cycle": {`{$ref: "#/$defs/a", $defs: {a: {$ref: "#/$defs/a"}}}`, ".order.x", ""},
		"remote $ref":  {`{properties: {c: {$ref: "https://example.com/customer.json"}}}`, ".order.c.x", ""},
	} {
		file := fmt.Sprintf("name: t\ndefaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n  - {name: s, agent: a, input: '%s'}\nschema: %s\n",
			c.read, c.schema)
		d, err := workflow.ParseFile("t.yaml", []byte(file), workflow.Options{})
		if name == "remote $ref" { // the schema does not compile; the path is not checked
			require.ErrorContains(t, err, "schema: ", name)
			require.NotContains(t, err.Error(), ".order.c", name)
			continue
		}
		if c.want == "" {
			require.NoError(t, err, name)
			require.Empty(t, d.Warnings, name)
			continue
		}
		require.ErrorContains(t, err, "t.yaml:6: steps[0].input: reads .order.", name)
		require.ErrorContains(t, err, c.want, name)
	}
}
