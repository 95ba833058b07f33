package workflow_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// trip is a workflow whose orders carry a travel booking, declared inline,
// and which books a seat per passenger (a jq path into the booking).
const trip = `name: trip
schema:
  type: object
  required: [orderId, booking]
  properties:
    orderId: {type: string}
    booking:
      type: object
      required: [passengers, out]
      properties:
        out: {type: string, format: date}
        passengers:
          type: array
          minItems: 1
          items: {type: object, required: [name], properties: {name: {type: string, minLength: 1}}}
defaults: {timeout: 5s}
agents:
  seats: {endpoint: "https://seats.example.com"}
steps:
  - name: book-seat
    agent: seats
    forEach: .booking.passengers
`

// An order is checked against its workflow's schema: a refusal names the
// field at fault; a jq path's array gives the items, numbered from 1 in its
// order.
func TestAnOrderIsCheckedAgainstItsWorkflowsSchema(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("trip.yaml", []byte(trip), workflow.Options{})
	require.NoError(t, err)
	good := json.RawMessage(`{"orderId":"b-1","booking":{"out":"2027-01-02","passengers":[{"name":"Ada"},{"name":"Bo"}]}}`)
	require.NoError(t, d.CheckOrder(good))
	items, err := d.Items(good)
	require.NoError(t, err)
	require.Equal(t, map[int]int{0: 2}, items)
	second, err := d.Item(good, 0, 2)
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Bo"}`, string(second), "item 2 is the array's second element")
	for order, want := range map[string]string{
		`{"orderId":"b-1"}`: "the order: missing property 'booking' (workflow trip's schema)",
		`{"orderId":"b-1","booking":{"out":"x","passengers":[{"name":""}]}}`:         "booking.passengers[0].name: minLength",
		`{"orderId":"b-1","booking":{"out":"2027-01-02","passengers":[{"name":7}]}}`: "booking.passengers[0].name: got number, want string",
		`{"orderId":"b-1","booking":{"out":"2027-01-02","passengers":[]}}`:           "booking.passengers: minItems",
	} {
		err := d.CheckOrder(json.RawMessage(order))
		require.ErrorContains(t, err, want, order)
	}
	// Every field at fault is named, not the first alone.
	err = d.CheckOrder(json.RawMessage(`{"orderId":"b-1","booking":{"out":"2027-01-02","passengers":[{"name":7},{"name":""}]}}`))
	require.ErrorContains(t, err, "booking.passengers[0].name: got number, want string; booking.passengers[1].name: minLength")
	_, err = d.Items(json.RawMessage(`{"orderId":"b-1","booking":{"passengers":{"name":"Ada"}}}`))
	require.ErrorContains(t, err, `step book-seat runs once per item of the order's ".booking.passengers", which is not an array`)

	// Read back from a store (JSON), compiled once: the same checks.
	b, err := json.Marshal(d)
	require.NoError(t, err)
	var back workflow.Definition
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, back.Compile())
	require.NoError(t, back.CheckOrder(good))
	require.ErrorContains(t, back.CheckOrder(json.RawMessage(`{"orderId":"b-1"}`)), "missing property 'booking'")
	second, err = back.Item(good, 0, 2)
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Bo"}`, string(second))
}

// The example workflows check the shop order as the product once did itself.
func TestTheExamplesDeclareTheShopOrder(t *testing.T) {
	t.Parallel()
	for _, name := range workflow.Examples() {
		d := workflow.MustExample(name)
		require.NotEmpty(t, d.Schema, name)
		require.NoError(t, d.CheckOrder(json.RawMessage(`{"orderId":"o-1","customerId":"c-1","items":[{"sku":"A-1","quantity":2,"unitPriceCents":499}]}`)), name)
		for order, want := range map[string]string{
			`{"orderId":"o-1","customerId":"c-1","items":[]}`:                                                         "items: minItems",
			`{"orderId":"o-1","customerId":"c-1","items":[{"sku":"A","quantity":0,"unitPriceCents":1}]}`:              "items[0].quantity: minimum",
			`{"orderId":"o-1","customerId":"c 1","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`:              "customerId: ",
			`{"orderId":"o-1","customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":1}],"coupon":"x"}`: "additional properties 'coupon' not allowed",
		} {
			require.ErrorContains(t, d.CheckOrder(json.RawMessage(order)), want, name+": "+order)
		}
	}
}

// A schema is read from a file beside the workflow file (a layer carries
// both); a schema that is not one, or a forEach it makes impossible, is a
// problem with its line and field.
func TestASchemaFileAndItsProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trip.schema.yaml"), []byte("type: object\nrequired: [orderId, legs]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.schema.yaml"), []byte("type: object\nminimum: x\n"), 0o644))
	file := filepath.Join(dir, "trip.yaml")
	require.NoError(t, os.WriteFile(file, []byte("name: trip\nschema: trip.schema.yaml\ndefaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n  - {name: s, agent: a}\n"), 0o644))
	d, err := workflow.LoadFile(file, workflow.Options{})
	require.NoError(t, err)
	require.Equal(t, "trip.schema.yaml", d.SchemaFile)
	require.ErrorContains(t, d.CheckOrder(json.RawMessage(`{"orderId":"x"}`)), "missing property 'legs'")
	inline, err := workflow.ParseFile("t.yaml", []byte("name: trip\nschema: {type: object, required: [orderId, legs]}\ndefaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n  - {name: s, agent: a}\n"), workflow.Options{})
	require.NoError(t, err)
	plain, err := workflow.ParseFile("t.yaml", []byte("name: trip\ndefaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n  - {name: s, agent: a}\n"), workflow.Options{})
	require.NoError(t, err)
	require.NotEqual(t, d.Version, plain.Version, "the schema is part of what a version runs")
	require.Equal(t, d.Version, inline.Version, "the same schema, the same version, wherever it is written")

	for name, c := range map[string]struct{ file, want string }{
		"not a schema": {"name: t\nschema: {type: 7}\n", "t.yaml:2: schema: not a valid JSON Schema: " + filepath.Join(dir, "t.yaml") +
			"'s field schema is not valid against metaschema"},
		"a bad $ref":   {"name: t\nschema: {properties: {a: {$ref: \"#/nope\"}}}\n", "t.yaml's field schema at /nope not found"},
		"outside":      {"name: t\nschema: {$ref: other.json}\n", `t.yaml:2: schema: not a valid JSON Schema: failing loading "other.json": a $ref points within the schema`},
		"its file":     {"name: t\nschema: bad.schema.yaml\n", "t.yaml:2: schema: not a valid JSON Schema: schema file bad.schema.yaml is not valid against metaschema"},
		"a path":       {"name: t\nschema: ../x.json\n", `t.yaml:2: schema: "../x.json": name a file beside the workflow file`},
		"no file":      {"name: t\nschema: nope.json\n", "t.yaml:2: schema: schema file: open nope.json"},
		"not an array": {"name: t\nschema: {properties: {items: {type: object}}}\n", `steps[0].forEach: "items": the schema makes .items an object, not an array`},
		"not allowed":  {"name: t\nschema: {additionalProperties: false, properties: {orderId: {}}}\n", `steps[0].forEach: ".booking.people": the schema allows no field booking in the order (only orderId)`},
	} {
		forEach := "items"
		if name == "not allowed" {
			forEach = ".booking.people"
		}
		_, err := workflow.ParseFile(filepath.Join(dir, "t.yaml"), []byte(c.file+"defaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n  - {name: s, agent: a, forEach: \""+forEach+"\"}\n"), workflow.Options{})
		require.ErrorContains(t, err, c.want, name)
		require.NotContains(t, err.Error(), "order.schema.json", "a schema is named as the file names it, never as a made-up file")
		require.NotContains(t, err.Error(), "file://", name)
	}
}

// A definition, its schema included, is kept in one DynamoDB item: one up
// to MaxDefinitionBytes is taken, a larger one refused with the reason (the
// store's conformance suite keeps the largest on both engines).
func TestADefinitionFitsTheStoresItem(t *testing.T) {
	t.Parallel()
	file := func(description int) []byte {
		return []byte("name: big\nschema: {type: object, description: \"" + strings.Repeat("x", description) +
			"\"}\ndefaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n  - {name: s, agent: a}\n")
	}
	small, err := workflow.ParseFile("big.yaml", file(10), workflow.Options{})
	require.NoError(t, err)
	n, err := small.StoredBytes()
	require.NoError(t, err)
	room := workflow.MaxDefinitionBytes - n + 10
	d, err := workflow.ParseFile("big.yaml", file(room), workflow.Options{})
	require.NoError(t, err, "at the limit")
	n, err = d.StoredBytes()
	require.NoError(t, err)
	require.Equal(t, workflow.MaxDefinitionBytes, n)
	_, err = workflow.ParseFile("big.yaml", file(room+1), workflow.Options{})
	require.ErrorContains(t, err, fmt.Sprintf("big.yaml:2: schema: the workflow's definition, its schema included, is %d bytes: at most %d",
		workflow.MaxDefinitionBytes+1, workflow.MaxDefinitionBytes))
}

// An order with faults in several fields is refused for them in the order
// of its fields, each time (the schema's library finds them in no fixed
// order): a refusal, its DLQ reason and its metric line say the same; and
// its unquoted form (a sealed deployment's) names the keywords, not the
// values.
func TestAnOrdersFaultsComeInTheOrderOfItsFields(t *testing.T) {
	d, err := workflow.ParseFile("trip.yaml", []byte(trip), workflow.Options{})
	require.NoError(t, err)
	order := json.RawMessage(`{"orderId":7,"booking":{"out":"someday","passengers":[{"name":""},{"name":3}]}}`)
	first := d.CheckOrder(order)
	require.Error(t, first)
	for range 30 {
		require.Equal(t, first.Error(), d.CheckOrder(order).Error())
	}
	require.Equal(t, "booking.passengers[0].name: minLength; booking.passengers[1].name: type; orderId: type (workflow trip's schema)",
		workflow.Unquoted(first))
	require.Contains(t, first.Error(), "got number, want string", "the message itself says what it found")
	require.NotContains(t, workflow.Unquoted(first), "got")
}
