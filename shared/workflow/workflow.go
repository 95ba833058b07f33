// Package workflow holds the pure rules of the pattern: step definitions, the
// states a task and its steps move through, the order in which steps and
// their undo actions run, and the supervisor's recovery decision. It imports
// no AWS SDK.
package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"time"

	"github.com/itchyny/gojq"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// State is the ProcessState of a task or step record.
type State string

// The states of step records (Pending, Processing, Processed, Error) and of
// task records (Pending while its steps run, Compensating while its undo
// actions run, and the end states Processed, Failed, CompensationFailed).
const (
	Pending      State = "Pending"
	Processing   State = "Processing"
	Processed    State = "Processed"
	Error        State = "Error"
	Compensating State = "Compensating"
	// Held: a step that holds on failure (Step.HoldFor) failed for good;
	// nothing new starts until the operator retries it, skips it with a
	// result, or has the order undone, or its hold ends (it is undone).
	Held               State = "Held"
	Failed             State = "Failed"             // a step failed for good; the completed steps were undone
	CompensationFailed State = "CompensationFailed" // an undo action failed for good too
	Cancelled          State = "Cancelled"          // cancelled: nothing more ran, the completed steps were undone
)

// Cause is why a record failed for good.
type Cause string

// The causes of an Error record.
const (
	Refused  Cause = "refused"   // its remote service refused it for good (a non-transient error reply)
	TimedOut Cause = "timed-out" // its attempts did not complete, up to the failure threshold
	Expired  Cause = "expired"   // the order's deadline passed while it waited or ran
	// Oversized: its service answered (the effect happened) with a result
	// over the workflow's limit: it is undone like a step given up on.
	Oversized Cause = "oversized"
)

// GaveUp reports whether the Supervisor gave up on the record (its outcome
// may be unknown), as opposed to the remote refusing it.
func (c Cause) GaveUp() bool { return c == TimedOut || c == Expired }

// Ended reports whether a task in state s needs no more work.
func (s State) Ended() bool {
	return s == Processed || s == Failed || s == CompensationFailed || s == Cancelled
}

// Action is one call to one remote service through its Agent.
type Action struct {
	Name         string        // unique within the workflow; part of the idempotency key
	Agent        string        // the remote service whose Agent runs it
	Do           string        `json:",omitempty"` // the action the Agent asks its service for ("": Name)
	Timeout      time.Duration // CompleteBy = claim time + Timeout
	MaxFailures  int           // supervisor recoveries allowed before it is an Error
	RetryBackoff time.Duration // base delay before a recovered action is scheduled again
	// Input, if set, is a jq expression over the action's Document: what
	// its service receives (none: the document itself).
	Input string `json:",omitempty"`
	// Async: the service accepts the call and answers later, with an event
	// carrying the attempt's token; Timeout bounds the whole wait.
	Async bool `json:",omitempty"`
	input *gojq.Code
}

// Step is an action of the workflow and, optionally, the action that undoes
// it when a later step fails for good; or, instead of an action, a wait for
// an event or a timer (Kind).
type Step struct {
	Action
	Undo *Action
	// NoUndo: the step changes nothing that needs undoing (the file's
	// undo: none: a lookup, a read, a notification that may be sent
	// twice). Unlike a step without an undo (a pivot), it never stops the
	// undoing nor refuses a cancel.
	NoUndo bool   `json:",omitempty"`
	Wait   *Wait  `json:",omitempty"`
	Sleep  *Sleep `json:",omitempty"`
	// Needs names the steps this one waits for (the file's needs:); nil:
	// the step before it (Definition.Needs). NoNeeds: the file said
	// needs: [], so it starts with the order.
	Needs   []string `json:",omitempty"`
	NoNeeds bool     `json:",omitempty"`
	// ForEach names an array of the order: the step runs once per item,
	// each item a record of its own (at most MaxForEachItems).
	ForEach string     `json:",omitempty"`
	forEach *gojq.Code // ForEach's jq path, compiled (Definition.Compile)
	// HoldFor > 0: failing for good holds the order for the operator
	// (State Held) rather than undoing it, for at most this long (the
	// file's onFailure: hold, holdFor).
	HoldFor time.Duration `json:",omitempty"`
	// Kept, in the definition a moved order runs, is the version that ran
	// this step, which the version moved to has not (Migration.Keep): the
	// order completed it; it never runs again (it needs nothing, nothing
	// needs it, the order ends without it) and is there for its undo alone.
	Kept string `json:",omitempty"`
}

// Definition is a workflow: its steps, each run when the steps it needs are
// done (by default the one before it: a line of steps).
type Definition struct {
	Name string
	// IDField is the member of its orders that is their id (the file's
	// id:); "": DefaultIDField, orderId. IDMember says which.
	IDField string `json:",omitempty"`
	// Version is a hash of what the definition runs (ParseFile sets it): the
	// same steps, timeouts and deadlines, the same version.
	Version string
	Steps   []Step
	// PickupTimeout is how long a ready step waits for a claim before the
	// Supervisor first looks for a lost message (waiting is never a failure).
	PickupTimeout time.Duration
	// Deadline bounds an order's run (each round's): past it, the order
	// fails for good, whatever it was waiting for. Its compensation, once
	// started, has as long again.
	Deadline time.Duration
	// ResultLimit is the most bytes a step's result may have (0: the
	// default, DefaultResultLimit); a larger answer fails the step for good.
	ResultLimit int `json:",omitempty"`
	// Schema is the JSON Schema every order of the workflow must meet
	// (checked at Submission), if the file declares one.
	Schema json.RawMessage `json:",omitempty"`
	// SchemaFile is the file beside the workflow file the schema was read
	// from ("": inline, or none).
	SchemaFile string `json:"-"`
	schema     *jsonschema.Schema
	// AgentSpecs are the remote services the steps call, by name.
	AgentSpecs map[string]Agent `json:"-"`
	// Migrate is how orders of an earlier version move to this one
	// (sasctl migrate); not part of the version.
	Migrate Migration `json:",omitzero"`
	// Base, for the definition a moved order runs that keeps the undo of
	// the version that ran a step of it: the version moved to, this is a
	// form of (Moving.Move). Not part of the version.
	Base string `json:",omitempty"`
	// Search are the order's fields declared searchable (search:): paths
	// such as customerId or region.code, whose values Submission keeps in
	// an index (SearchValues). Not part of the version.
	Search []string `json:",omitempty"`
	// File is the file the definition was read from, if any.
	File string `json:"-"`
	// Warnings are what validation found in File that leaves it valid (a
	// path into the order it could not check, with no schema): sasctl
	// workflow validate prints them; a deployment ignores them.
	Warnings Problems `json:"-"`
	lines    lineMap  // where each field of File is
}

// Agent is one remote service: how its Agent reaches it.
type Agent struct {
	Name      string
	Endpoint  string        // the base URL its actions are POSTed under ("" for a custom agent)
	Timeout   time.Duration // one HTTP call's
	Transient []int         // HTTP statuses retried (nil: 408, 429 and 5xx)
	// Refuse are HTTP statuses that refuse the step for good even where they
	// could be read as a refusal of the agent's credentials (401, 403): with
	// credentials, those are read again and the call made once more, then
	// retried as transient, unless listed here. Any other status neither
	// transient nor 2xx refuses the step whether listed or not.
	Refuse []int
	Auth   *Auth // nil: none
	Custom bool  // an Agent written in Go, deployed from functions/<name>
	// Concurrency is the most instances of its function that run at once
	// (its event source mapping's MaximumConcurrency, 2 to 1,000): what
	// protects its service from more calls at once than it takes. 0: the
	// deployment's agentConcurrency.
	Concurrency int
	// MemoryMB is its function's memory (0: the stack's, 128): more for an
	// agent whose steps read large payloads (each instance reads documents
	// of up to a quarter of it at once, and at least 33 MB:
	// kept.BudgetFor).
	MemoryMB int `json:",omitempty"`
	// RateLimit bounds its calls across every instance (zero: none): no
	// window of its period holds more than RateLimit.Most() of them at the
	// moments they are admitted; a call over it waits (flow.Gate), never
	// fails.
	RateLimit Rate `json:",omitempty"`
	// PerKey bounds its calls in flight per value of an expression over the
	// step's document (nil: none): one per customer, say.
	PerKey *PerKey `json:",omitempty"`
}

// PerKey is at most InFlight calls at once per value of Key, a jq
// expression over the step's document (an order's customer, an account):
// a call over it waits (its attempt is given back, no failure counted)
// until a slot is let go, at its attempt's end, or its CompleteBy passes.
type PerKey struct {
	Key      string
	InFlight int
	code     *gojq.Code
}

// The most calls in flight per key an agent may declare.
const MaxInFlightPerKey = 1000

// KeyFor is the key value of a step's document: the expression's string,
// or its other value as JSON; "" (a null value): the call is not bounded.
func (p PerKey) KeyFor(doc Document) (string, error) {
	code := p.code
	if code == nil {
		var err error
		if code, err = compileJQ(p.Key); err != nil {
			return "", err
		}
	}
	v, err := evalDoc(code, doc, "perKey.key")
	if err != nil {
		return "", err
	}
	var s string
	switch {
	case string(v) == "null":
		return "", nil
	case json.Unmarshal(v, &s) == nil:
		return s, nil
	}
	return string(v), nil
}

// Rate is at most Calls calls every Per, with bursts of up to Burst calls
// at once after a quiet spell (0 or 1: none: each call an interval after
// the one before). It means that no window of Per (half-open: [t, t+Per))
// holds more than Most calls at the moments they are admitted: Calls, and
// Burst-1 more with a burst.
type Rate struct {
	Calls int           `json:",omitempty"`
	Per   time.Duration `json:",omitempty"`
	Burst int           `json:",omitempty"`
}

// MaxBurst is the largest burst a rate limit may allow.
const MaxBurst = 10_000

// Interval is the time between two calls at the rate, rounded down to the
// nanosecond (1/3 s is 333,333,333 ns): a figure to print or to compare
// with. A schedule of turns is kept with Span, which is exact: N turns
// take Per, never a nanosecond less.
func (r Rate) Interval() time.Duration { return r.Per / time.Duration(r.Calls) }

// Span is how long n turns of the rate take from the first's moment: n
// intervals of Per/Calls, exactly, rounded up to the nanosecond (a rate's
// interval is rarely a whole number of them: 1 s/3, 1 s/99,999). Rounded
// up once for the whole span, never interval by interval, so that turn i
// of a schedule is at its start plus Span(i) and turns i and i+Calls are
// exactly Per apart, whatever i: the schedule never drifts.
func (r Rate) Span(n int64) time.Duration {
	if n <= 0 || r.Calls <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), uint64(r.Per))
	if hi >= uint64(r.Calls) { // over 292 years: no schedule reaches it
		return time.Duration(math.MaxInt64)
	}
	q, rem := bits.Div64(hi, lo, uint64(r.Calls))
	if rem > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(q)
}

// Tolerance is how far ahead of now a schedule may be booked while a call
// still goes at once: Burst-1 intervals, rounded down to the nanosecond
// (0 with no burst). Rounded down, so that a burst never lets one call
// more through than Most.
func (r Rate) Tolerance() time.Duration {
	if r.Burst <= 1 || r.Calls <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(r.Burst-1), uint64(r.Per))
	q, _ := bits.Div64(hi, lo, uint64(r.Calls)) // Burst-1 < Calls·2^64/Per: no overflow at MaxBurst
	return time.Duration(q)
}

// Turns is how many whole intervals of the rate d holds: d·Calls/Per,
// rounded down (0 for no rate).
func (r Rate) Turns(d time.Duration) int64 {
	if d <= 0 || r.Calls <= 0 || r.Per <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), uint64(r.Calls))
	if hi >= uint64(r.Per) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(r.Per))
	return int64(min(q, math.MaxInt64))
}

// Most is the most calls the rate lets into any window of Per: Calls, and
// Burst-1 more with a burst.
func (r Rate) Most() int { return r.Calls + max(r.Burst, 1) - 1 }

// Meaning is what the rate promises, as a sentence's end: "at most 3 calls
// in any second", "at most 1 call in any minute".
func (r Rate) Meaning() string {
	period := "second"
	if r.Per == time.Minute {
		period = "minute"
	}
	calls := "calls"
	if r.Most() == 1 {
		calls = "call"
	}
	return fmt.Sprintf("at most %d %s in any %s", r.Most(), calls, period)
}

// String is the rate as a workflow file writes it: 50/s, 600/m, and its
// burst if it has one (50/s burst 10).
func (r Rate) String() string {
	unit := "s"
	if r.Per == time.Minute {
		unit = "m"
	}
	if r.Burst > 1 {
		return fmt.Sprintf("%d/%s burst %d", r.Calls, unit, r.Burst)
	}
	return fmt.Sprintf("%d/%s", r.Calls, unit)
}

// rateRE is a rate limit as a file writes it.
var rateRE = regexp.MustCompile(`^([1-9][0-9]{0,4})/(s|m)$`)

// parseRate reads a rate limit: N/s or N/m, N from 1 to 99,999.
func parseRate(s string) (Rate, error) {
	m := rateRE.FindStringSubmatch(s)
	if m == nil {
		return Rate{}, fmt.Errorf("%q is not a rate like 50/s or 600/m", s)
	}
	n, _ := strconv.Atoi(m[1])
	if m[2] == "m" {
		return Rate{Calls: n, Per: time.Minute}, nil
	}
	return Rate{Calls: n, Per: time.Second}, nil
}

// The range of an event source mapping's MaximumConcurrency (Lambda's).
const (
	MinConcurrency = 2
	MaxConcurrency = 1000
	// MinMemoryMB and MaxMemoryMB are a Lambda function's memory bounds.
	MinMemoryMB = 128
	MaxMemoryMB = 10240
)

// Auth is how an Agent proves itself to its service: a header whose value
// is a secret (Secrets Manager) or a SecureString parameter (SSM), or an
// AWS SigV4 signature with the function's role.
type Auth struct {
	Header    string // the header the secret goes in: Authorization, X-Api-Key
	Prefix    string // put before the secret: "Bearer "
	Secret    string // a Secrets Manager secret's name or ARN
	Parameter string // an SSM SecureString parameter's name
	SigV4     *SigV4
}

// SigV4 signs the requests for an IAM-authorised endpoint.
type SigV4 struct {
	Service  string // execute-api (API Gateway), lambda (function URLs)
	Region   string
	Resource string // the ARN the function's role may invoke (the stack's IAM statement)
}

// DoName is the action the Agent asks its service for.
func (a Action) DoName() string {
	if a.Do != "" {
		return a.Do
	}
	return a.Name
}

// Validate checks the definition against the agents the deployment runs.
func (d Definition) Validate(agents []string) error {
	if d.Name == "" {
		return errors.New("workflow: definition has no name")
	}
	if len(d.Steps) == 0 {
		return fmt.Errorf("workflow %q: no steps", d.Name)
	}
	if d.PickupTimeout <= 0 {
		return fmt.Errorf("workflow %q: pickup timeout must be positive", d.Name)
	}
	if d.Deadline <= 0 {
		return fmt.Errorf("workflow %q: order deadline must be positive", d.Name)
	}
	known := make(map[string]bool, len(agents))
	for _, a := range agents {
		known[a] = true
	}
	seen := map[string]bool{}
	for i, s := range d.Steps {
		if s.Kind() != KindAgent {
			if seen[s.Name] || s.Name == "" {
				return fmt.Errorf("workflow %q: step %d needs a name of its own", d.Name, i)
			}
			seen[s.Name] = true
			continue
		}
		if err := s.Action.validate(d.Name, fmt.Sprintf("step %d", i), known, seen); err != nil {
			return err
		}
		if s.Undo != nil {
			if err := s.Undo.validate(d.Name, fmt.Sprintf("undo of step %q", s.Name), known, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a Action) validate(wf, where string, known, seen map[string]bool) error {
	switch {
	case a.Name == "":
		return fmt.Errorf("workflow %q: %s has no name", wf, where)
	case seen[a.Name]:
		return fmt.Errorf("workflow %q: duplicate step %q", wf, a.Name)
	case !known[a.Agent]:
		return fmt.Errorf("workflow %q: step %q calls unknown agent %q", wf, a.Name, a.Agent)
	case a.Timeout <= 0:
		return fmt.Errorf("workflow %q: step %q has no timeout", wf, a.Name)
	case a.MaxFailures < 1:
		return fmt.Errorf("workflow %q: step %q needs a failure threshold of at least 1", wf, a.Name)
	case a.RetryBackoff < 0:
		return fmt.Errorf("workflow %q: step %q has a negative retry backoff", wf, a.Name)
	}
	seen[a.Name] = true
	return nil
}

// Agents lists the distinct agents the definition calls, in step order.
func (d Definition) Agents() []string {
	var out []string
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, s := range d.Steps {
		add(s.Agent)
		if s.Undo != nil {
			add(s.Undo.Agent)
		}
	}
	return out
}

// IdempotencyKey is the key an Agent sends with every attempt of one action
// of one order in one round (a resubmitted task runs a new round, whose
// effects are new), so the remote service applies each effect once.
//
// A forEach step's item is an action of its own: its name carries the item
// (RecordName), so each item's effect is applied once.
func IdempotencyKey(orderID, action string, round int) string {
	if round <= 1 {
		return orderID + "/" + action
	}
	return fmt.Sprintf("%s/%s/r%d", orderID, action, round)
}

// RecordName is a record's name in its idempotency key, its result's key and
// the operator's views: its action's name, and for one item of a forEach
// step, the item's number after a # (pack-item#2).
func RecordName(name string, r Ref) string {
	if r.Item == 0 {
		return name
	}
	return fmt.Sprintf("%s#%d", name, r.Item)
}
