package workflow_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/sas-go/sas/shared/workflow"
)

// schema compiles the JSON Schema published beside the examples.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("workflow.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("workflow.schema.json", doc))
	s, err := c.Compile("workflow.schema.json")
	require.NoError(t, err)
	return s
}

// instance reads a YAML workflow file as the JSON value the schema checks.
func instance(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(data, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return inst
}

func TestExamplesParseAndMatchTheSchema(t *testing.T) {
	t.Parallel()
	s := schema(t)
	require.ElementsMatch(t, []string{"order", "single", "fulfilment", "approval", "parallel"}, workflow.Examples())
	for _, name := range workflow.Examples() {
		data, err := workflow.ExampleFile(name)
		require.NoError(t, err)
		d, err := workflow.ParseFile(name+".yaml", data, workflow.Options{MaxStepTimeout: 25 * time.Second})
		require.NoError(t, err, name)
		require.Empty(t, d.Warnings, "%s: every path into the order is checked against its schema", name)
		require.Equal(t, name, d.Name)
		require.Len(t, d.Version, 8, "a short hash")
		require.NoError(t, d.Validate(d.Agents()), name)
		require.NoError(t, s.Validate(instance(t, data)), name)
	}
}

func TestTheOrderExampleIsTheOrderWorkflow(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample("order")
	require.Equal(t, []string{"inventory", "payment", "shipping"}, d.Agents())
	require.Equal(t, 24*time.Hour, d.Deadline)
	require.Equal(t, time.Minute, d.PickupTimeout)
	require.Equal(t, "release-inventory", d.Steps[0].Undo.Name)
	require.Equal(t, "inventory", d.Steps[0].Undo.Agent, "an undo's agent defaults to its step's")
	require.Equal(t, 20*time.Second, d.Steps[2].Timeout, "from defaults")
	require.Nil(t, d.Steps[2].Undo)
	require.Equal(t, "${SAS_REMOTE_BASE_URL}/v1/services/payment", d.AgentSpecs["payment"].Endpoint, "kept for Resolve")
	require.Equal(t, []string{"SAS_REMOTE_BASE_URL"}, d.Vars())
}

func TestTheFulfilmentExampleDeclaresEachAgentsAuth(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample("fulfilment")
	require.Equal(t, []string{"warehouse", "billing", "loyalty", "courier"}, d.Agents())
	require.Equal(t, "picks", d.Steps[0].DoName())
	require.Equal(t, "invoice", d.Steps[1].DoName(), "the action defaults to the step's name")
	require.Equal(t, 10*time.Second, d.Steps[1].Timeout)
	wh := d.AgentSpecs["warehouse"]
	require.Equal(t, 5*time.Second, wh.Timeout)
	require.Equal(t, []int{409, 429, 500, 502, 503, 504}, wh.Transient)
	require.Equal(t, "X-Api-Key", wh.Auth.Header)
	require.Equal(t, "Bearer ", d.AgentSpecs["billing"].Auth.Prefix)
	require.True(t, d.AgentSpecs["loyalty"].Custom)
	require.Equal(t, "execute-api", d.AgentSpecs["courier"].Auth.SigV4.Service)

	vars := map[string]string{"WAREHOUSE_URL": "https://wh.example.com/api", "WAREHOUSE_SECRET": "prod/warehouse",
		"BILLING_URL": "https://billing.example.com", "BILLING_TOKEN_PARAMETER": "/prod/billing/token",
		"COURIER_URL": "https://abc.execute-api.eu-west-1.amazonaws.com/prod", "AWS_REGION": "eu-west-1",
		"COURIER_API_ARN": "arn:aws:execute-api:eu-west-1:111111111111:abc/prod/POST/*"}
	r, err := d.Resolve(func(k string) string { return vars[k] })
	require.NoError(t, err)
	require.Equal(t, "https://wh.example.com/api", r.AgentSpecs["warehouse"].Endpoint)
	require.Equal(t, "prod/warehouse", r.AgentSpecs["warehouse"].Auth.Secret)
	require.Equal(t, "eu-west-1", r.AgentSpecs["courier"].Auth.SigV4.Region)
	require.Equal(t, "${WAREHOUSE_URL}", d.AgentSpecs["warehouse"].Endpoint, "Resolve copies; the definition keeps its ${NAME}s")
	require.Equal(t, d.Version, r.Version, "where the services are is not what the workflow runs")

	delete(vars, "WAREHOUSE_SECRET")
	vars["BILLING_URL"] = "billing.example.com"
	_, err = d.Resolve(func(k string) string { return vars[k] })
	require.Equal(t, []string{
		`examples/fulfilment.yaml:24: agents.billing.endpoint: "billing.example.com" is not an http(s) URL`,
		`examples/fulfilment.yaml:22: agents.warehouse.auth.secret: ${WAREHOUSE_SECRET} is not set`,
	}, problems(err))
}

// problems are an error's problems as text, one each.
func problems(err error) []string {
	var out []string
	for _, p := range workflow.AsProblems(err) {
		out = append(out, p.String())
	}
	return out
}

const broken = `name: Shop Orders
deadline: 2 days
agents:
  inventory:
    endpoint: http://inventory.internal
  payment:
    endpoint: ftp://payment
    transient: [503, 200]
  vault:
    endpoint: http://vault.internal
    auth:
      header: X-Api-Key
      secret: vault-key
      parameter: /vault/key
steps:
  - name: reserve
    agent: inventory
    timeout: 1h
    undo:
      name: release
  - name: charge
    agent: payments
    timeout: 10s
    retries: 3
  - name: reserve
    agent: inventory
  - name: ship
    agent: inventory
    timeout: 30s
    undo:
      name: charge
`

func TestParseFileReportsEveryProblemWithItsLine(t *testing.T) {
	t.Parallel()
	_, err := workflow.ParseFile("shop.yaml", []byte(broken), workflow.Options{})
	require.Equal(t, []string{
		`shop.yaml:1: name: "Shop Orders": a workflow's name is 1-40 lower-case letters, digits or -, starting with a letter`,
		`shop.yaml:2: deadline: "2 days" is not a duration like 30s, 5m or 24h`,
		`shop.yaml:6: agents.payment: agent "payment" is declared but no step or undo action calls it`,
		`shop.yaml:7: agents.payment.endpoint: "ftp://payment" is not an http(s) URL`,
		`shop.yaml:8: agents.payment.transient[1]: 200 is not an HTTP error status (400-599)`,
		`shop.yaml:9: agents.vault: agent "vault" is declared but no step or undo action calls it`,
		`shop.yaml:11: agents.vault.auth: say one of secret (Secrets Manager), parameter (SSM SecureString) or sigv4`,
		`shop.yaml:19: steps[0].undo.timeout: step "release" has no timeout (set it, or defaults.timeout)`,
		`shop.yaml:22: steps[1].agent: unknown agent "payments": declare it under agents`,
		`shop.yaml:24: steps[1].retries: unknown field retries`,
		`shop.yaml:25: steps[2].name: duplicate step "reserve": every step and undo action needs its own name`,
		`shop.yaml:25: steps[2].timeout: step "reserve" has no timeout (set it, or defaults.timeout)`,
		`shop.yaml:30: steps[3].undo.timeout: step "charge" has no timeout (set it, or defaults.timeout)`,
		`shop.yaml:31: steps[3].undo.name: duplicate step "charge": every step and undo action needs its own name`,
	}, problems(err), "the decoder's problems (a bad duration, an unknown field) and every other one, in one pass")

	fixed := strings.Replace(strings.Replace(broken, "2 days", "48h", 1), "    retries: 3\n", "", 1)
	_, err = workflow.ParseFile("shop.yaml", []byte(fixed), workflow.Options{MaxStepTimeout: 15 * time.Minute})
	require.Equal(t, []string{
		`shop.yaml:1: name: "Shop Orders": a workflow's name is 1-40 lower-case letters, digits or -, starting with a letter`,
		`shop.yaml:6: agents.payment: agent "payment" is declared but no step or undo action calls it`,
		`shop.yaml:7: agents.payment.endpoint: "ftp://payment" is not an http(s) URL`,
		`shop.yaml:8: agents.payment.transient[1]: 200 is not an HTTP error status (400-599)`,
		`shop.yaml:9: agents.vault: agent "vault" is declared but no step or undo action calls it`,
		`shop.yaml:11: agents.vault.auth: say one of secret (Secrets Manager), parameter (SSM SecureString) or sigv4`,
		`shop.yaml:18: steps[0].timeout: step "reserve"'s timeout 1h0m0s is longer than its agent function allows (15m0s: its timeout less the time to reply)`,
		`shop.yaml:19: steps[0].undo.timeout: step "release" has no timeout (set it, or defaults.timeout)`,
		`shop.yaml:22: steps[1].agent: unknown agent "payments": declare it under agents`,
		`shop.yaml:24: steps[2].name: duplicate step "reserve": every step and undo action needs its own name`,
		`shop.yaml:24: steps[2].timeout: step "reserve" has no timeout (set it, or defaults.timeout)`,
		`shop.yaml:29: steps[3].undo.timeout: step "charge" has no timeout (set it, or defaults.timeout)`,
		`shop.yaml:30: steps[3].undo.name: duplicate step "charge": every step and undo action needs its own name`,
	}, problems(err))
	require.Error(t, schema(t).Validate(instance(t, []byte(fixed))), "the schema refuses it too")
}

func TestParseFileRefusesWhatIsNotAWorkflow(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ text, want string }{
		"bad yaml":    {"name: a\nsteps: [\n", "x.yaml:2: did not find expected node content"},
		"a list":      {"- name: a\n", "x.yaml:1: cannot unmarshal !!seq into workflow.fileSpec"},
		"empty":       {"", "x.yaml: name: \"\": a workflow's name is 1-40 lower-case letters, digits or -, starting with a letter"},
		"json":        {`{"name": "j", "agents": {"a": {"endpoint": "http://a"}}, "steps": [{"name": "s", "agent": "a", "timeout": "5"}]}`, `x.yaml:1: steps[0].timeout: "5" is not a duration like 30s, 5m or 24h`},
		"no steps":    {"name: a\nagents: {}\n", "x.yaml: steps: a workflow needs at least one step"},
		"defaults":    {"name: a\ndefaults: {name: x, timeout: 1s}\nagents: {a: {endpoint: 'http://a'}}\nsteps: [{name: s, agent: a}]\n", "x.yaml:2: defaults.name: unknown field name"},
		"neg pick":    {"name: a\npickupTimeout: -1s\nagents: {a: {endpoint: 'http://a'}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: pickupTimeout: must be positive, not -1s"},
		"no agent":    {"name: a\nagents: {a: {timeout: 1s}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: agents.a.endpoint: an HTTP agent needs an endpoint (the base URL its actions are POSTed under), or custom: true"},
		"custom ep":   {"name: a\nagents: {a: {custom: true, endpoint: 'http://a'}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: agents.a: a custom agent (Go code) has no endpoint, auth, transient or refuse: its code decides"},
		"refuse 200":  {"name: a\nagents: {a: {endpoint: 'http://a', refuse: [403, 200]}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: agents.a.refuse[1]: 200 is not an HTTP error status (400-599)"},
		"concurrency": {"name: a\nagents: {a: {endpoint: 'http://a', concurrency: 1}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: agents.a.concurrency: 1: an agent's concurrency (its event source mapping's MaximumConcurrency) is 2 to 1000"},
		"memory":      {"name: a\nagents: {a: {endpoint: 'http://a', memory: 64}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: agents.a.memory: 64: an agent's memory (its function's, in MB) is 128 to 10240"},
		"both":        {"name: a\nagents: {a: {endpoint: 'http://a', transient: [409, 429], refuse: [403, 409]}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n", "x.yaml:2: agents.a.refuse[1]: 409 is also transient: a status is retried or refuses the step, not both"},
	} {
		_, err := workflow.ParseFile("x.yaml", []byte(c.text), workflow.Options{})
		require.Contains(t, problems(err), c.want, name)
	}
}

// A step's action travels in every request of the step and in the URL of
// its call: a path segment of at most MaxActionBytes, so that the largest
// request is bounded (message.MaxEnvelopeBytes).
func TestAnActionIsABoundedPathSegment(t *testing.T) {
	t.Parallel()
	file := func(action string) string {
		return "name: a\nagents: {a: {endpoint: 'http://a'}}\nsteps: [{name: s, agent: a, timeout: 1s, action: '" + action + "'}]\n"
	}
	longest := strings.Repeat("a", workflow.MaxActionBytes-7) + ":v1.x~_"
	d, err := workflow.ParseFile("x.yaml", []byte(file(longest)), workflow.Options{})
	require.NoError(t, err)
	require.Equal(t, longest, d.Steps[0].DoName())
	for _, bad := range []string{longest + "a", "v1/charge", "charge it", "<charge>", "-x"} {
		_, err := workflow.ParseFile("x.yaml", []byte(file(bad)), workflow.Options{})
		require.Contains(t, strings.Join(problems(err), "\n"), fmt.Sprintf("x.yaml:3: steps[0].action: %q: an action is 1-128 letters", bad), bad)
	}
}

func TestSetRunsSeveralWorkflowsSharingAgents(t *testing.T) {
	t.Parallel()
	order, single := workflow.MustExample("order"), workflow.MustExample("single")
	s, err := workflow.NewSet(order, single)
	require.NoError(t, err)
	require.Equal(t, "order", s.Default().Name)
	require.Equal(t, []string{"order", "single"}, s.Names())
	require.Equal(t, []string{"inventory", "payment", "shipping"}, s.Agents())
	d, ok := s.Get("")
	require.True(t, ok)
	require.Equal(t, "order", d.Name)
	_, ok = s.Version("single", single.Version)
	require.True(t, ok)
	_, ok = s.Version("single", "00000000")
	require.False(t, ok, "another version of it is not in the set")
	_, ok = s.Get("saga")
	require.False(t, ok)

	faster := s.With(workflow.Settings{StepTimeout: 3 * time.Second})
	fd, _ := faster.Get("order")
	require.Equal(t, 3*time.Second, fd.Steps[2].Timeout)
	require.NotEqual(t, order.Version, fd.Version, "another timeout, another version")
	require.Equal(t, 20*time.Second, order.Steps[2].Timeout, "With copies")

	other := []byte(strings.Replace(string(must(workflow.ExampleFile("single"))), "name: single", "name: refund", 1))
	other = []byte(strings.Replace(string(other), "${SAS_REMOTE_BASE_URL}/v1/services/payment", "https://pay.example.com", 1))
	refund, err := workflow.ParseFile("refund.yaml", other, workflow.Options{})
	require.NoError(t, err)
	_, err = workflow.NewSet(order, refund)
	require.Equal(t, []string{`refund.yaml:12: agents.payment: agent "payment" is declared differently in examples/order.yaml: one service, one declaration`},
		problems(err))
	_, err = workflow.NewSet(order, order)
	require.Equal(t, []string{`examples/order.yaml:4: name: workflow "order" is also defined in examples/order.yaml`}, problems(err))
}

func TestLoadFilesGathersEveryFilesProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := dir+"/order.yaml", dir+"/bad.yaml"
	require.NoError(t, os.WriteFile(good, must(workflow.ExampleFile("order")), 0o600))
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\nagents: {a: {endpoint: 'http://a'}}\nsteps: [{name: s, agent: b}]\n"), 0o600))
	s, err := workflow.LoadFiles([]string{good}, workflow.Options{})
	require.NoError(t, err)
	require.Equal(t, "order", s.Default().Name)
	_, err = workflow.LoadFiles([]string{good, bad, dir + "/missing.yaml"}, workflow.Options{})
	require.ErrorContains(t, err, "missing.yaml: no such file")
	_, err = workflow.LoadFiles([]string{good, bad}, workflow.Options{})
	require.Equal(t, []string{
		bad + `:2: agents.a: agent "a" is declared but no step or undo action calls it`,
		bad + `:3: steps[0].agent: unknown agent "b": declare it under agents`,
		bad + `:3: steps[0].timeout: step "s" has no timeout (set it, or defaults.timeout)`,
	}, problems(err))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// An agent's concurrency and memory: read from the file, 0 when it says
// none (the deployment's), and refused out of Lambda's range by the schema
// too.
func TestAnAgentsConcurrencyAndMemory(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		field      string
		value, bad int
		got        func(workflow.Agent) int
	}{
		{"concurrency", 5, 1001, func(a workflow.Agent) int { return a.Concurrency }},
		{"memory", 1024, 64, func(a workflow.Agent) int { return a.MemoryMB }},
	} {
		text := fmt.Sprintf("name: a\nagents: {a: {endpoint: 'http://a', %s: %d}, b: {custom: true}}\n", c.field, c.value) +
			"steps: [{name: s, agent: a, timeout: 1s}, {name: t, agent: b, timeout: 1s}]\n"
		d, err := workflow.ParseFile("x.yaml", []byte(text), workflow.Options{})
		require.NoError(t, err)
		require.Equal(t, c.value, c.got(d.AgentSpecs["a"]), c.field)
		require.Zero(t, c.got(d.AgentSpecs["b"]), "the deployment's %s", c.field)
		require.NoError(t, schema(t).Validate(instance(t, []byte(text))))
		bad := strings.Replace(text, fmt.Sprintf("%s: %d", c.field, c.value), fmt.Sprintf("%s: %d", c.field, c.bad), 1)
		require.Error(t, schema(t).Validate(instance(t, []byte(bad))), c.field)
	}
}

// An agent's flow control as a file writes it: a rate limit, and calls in
// flight per key whose value comes from the step's document.
func TestAnAgentsRateLimitAndCallsInFlightPerKey(t *testing.T) {
	t.Parallel()
	text := "name: a\nagents: {a: {endpoint: 'http://a', rateLimit: 600/m, rateBurst: 5, perKey: {key: .order.customer, inFlight: 2}}," +
		" b: {endpoint: 'http://b', perKey: {key: '.results.open.account'}}}\n" +
		"steps: [{name: open, agent: b, timeout: 1s}, {name: s, agent: a, timeout: 1s}]\n"
	d, err := workflow.ParseFile("x.yaml", []byte(text), workflow.Options{})
	require.NoError(t, err)
	require.NoError(t, schema(t).Validate(instance(t, []byte(text))))
	a := d.AgentSpecs["a"]
	require.Equal(t, workflow.Rate{Calls: 600, Per: time.Minute, Burst: 5}, a.RateLimit)
	require.Equal(t, "600/m burst 5", a.RateLimit.String())
	require.Equal(t, 100*time.Millisecond, a.RateLimit.Interval())
	require.Equal(t, 2, a.PerKey.InFlight)
	require.Equal(t, 1, d.AgentSpecs["b"].PerKey.InFlight, "one at a time unless it says")

	for doc, want := range map[string]string{
		`{"order":{"customer":"c-1"}}`:    "c-1",
		`{"order":{"customer":42}}`:       "42",
		`{"order":{"customer":{"id":1}}}`: `{"id":1}`,
		`{"order":{}}`:                    "", // null: not bounded
	} {
		var d workflow.Document
		require.NoError(t, json.Unmarshal([]byte(doc), &d))
		got, err := a.PerKey.KeyFor(d)
		require.NoError(t, err, doc)
		require.Equal(t, want, got, doc)
	}
	got, err := d.AgentSpecs["b"].PerKey.KeyFor(workflow.Document{Order: json.RawMessage(`{}`),
		Results: map[string]json.RawMessage{"open": json.RawMessage(`{"account":"acc-9"}`)}})
	require.NoError(t, err)
	require.Equal(t, "acc-9", got, "a key from an earlier step's result")
	_, err = a.PerKey.KeyFor(workflow.Document{Order: json.RawMessage(`[1]`)})
	var ee *workflow.ExpressionError
	require.ErrorAs(t, err, &ee, "a key the document cannot give refuses the step")

	for bad, says := range map[string]string{
		"rateLimit: 50/h":                   `"50/h" is not a rate like 50/s or 600/m`,
		"perKey: {key: '.order.'}":          "agents.a.perKey.key",
		"perKey: {inFlight: 2}":             "perKey needs a key",
		"perKey: {key: .x, inFlight: 1001}": "calls in flight per key are 1 to 1000",
	} {
		text := "name: a\nagents: {a: {endpoint: 'http://a', " + bad + "}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n"
		_, err := workflow.ParseFile("x.yaml", []byte(text), workflow.Options{})
		require.ErrorContains(t, err, says, bad)
	}
}

// A YAML syntax error is reported at its own line: yaml.v3 names the line
// of the mapping or list it was reading (line 1 for a problem among the
// top-level keys, line 2 for one in the steps' list), not the bad line.
func TestAYAMLErrorIsReportedAtItsLine(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name: long\ndeadline: 1h\ndefaults: {timeout: 5s}\nagents:\n  a: {endpoint: \"https://a.example.com\"}\nsteps:\n")
	for i := 0; strings.Count(b.String(), "\n") < 62; i++ {
		fmt.Fprintf(&b, "  - name: s%d\n    agent: a\n", i)
	}
	require.Equal(t, 62, strings.Count(b.String(), "\n"))
	valid := b.String() + "  - name: last\n    agent: a\n"
	_, err := workflow.ParseFile("x.yaml", []byte(valid), workflow.Options{})
	require.NoError(t, err)

	for name, c := range map[string]struct{ text, want string }{
		"a step's key indented too little": {b.String() + "   maxFailures: 2\n", "x.yaml:63: did not find expected '-' indicator"},
		"a step indented too much":         {b.String() + "    - name: last\n", "x.yaml:63: did not find expected key"},
		"a key indented too little":        {"name: a\nagents:\n  a:\n    endpoint: e\n timeout: 1s\n", "x.yaml:5: did not find expected key"},
		"a top-level key":                  {strings.Replace(valid, "  - name: s0\n", "  - name: s0\n timeout: 1s\n", 1), "x.yaml:8: did not find expected key"},
		"a value too deep":                 {b.String() + "  - name: last\n    agent: a\n      timeout: 5s\n", "x.yaml:65: mapping values are not allowed in this context"},
	} {
		_, err := workflow.ParseFile("x.yaml", []byte(c.text), workflow.Options{})
		require.Equal(t, c.want, problems(err)[0], name)
	}
}

// resultLimit is taken at both ends of its range, by the code and the
// published schema alike (the schema's said at most 64KB, and no MB, while
// the code took 16MB), and refused past them; unset, it is the default.
func TestAResultLimitAtBothEndsOfItsRange(t *testing.T) {
	t.Parallel()
	s := schema(t)
	file := func(limit string) []byte {
		return []byte("name: r\n" + limit + "agents: {a: {endpoint: 'http://a'}}\nsteps:\n  - {name: s, agent: a, timeout: 5s}\n")
	}
	for limit, want := range map[string]int{"": workflow.DefaultResultLimit, "1": 1, "16777216": workflow.MaxResultLimit, "16MB": workflow.MaxResultLimit,
		"16MiB": workflow.MaxResultLimit, "16384KB": workflow.MaxResultLimit, "256KB": 256 << 10} {
		data := file("resultLimit: " + limit + "\n")
		if limit == "" {
			data = file("")
		}
		d, err := workflow.ParseFile("r.yaml", data, workflow.Options{})
		require.NoError(t, err, limit)
		require.Equal(t, want, d.Limit(), limit)
		require.NoError(t, s.Validate(instance(t, data)), limit)
	}
	for _, limit := range []string{"0", "16777217", "16385KB", "17MB"} {
		data := file("resultLimit: " + limit + "\n")
		_, err := workflow.ParseFile("r.yaml", data, workflow.Options{})
		require.ErrorContains(t, err, "a result limit is 1 byte to 16MB", limit)
		if !strings.HasSuffix(limit, "B") { // a size with a unit is bounded by the code alone
			require.Error(t, s.Validate(instance(t, data)), limit)
		}
	}
	require.Equal(t, 256<<10, workflow.DefaultResultLimit, "Step Functions' limit: a 5 KB REST answer is no failure")
}
