package workflow

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Defaults of a workflow file's optional fields.
const (
	DefaultPickupTimeout = time.Minute
	DefaultMaxFailures   = 3
	DefaultAgentTimeout  = 10 * time.Second
)

var (
	workflowNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	agentNameRE    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,24}$`) // part of queue, function and role names
	actionNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// serviceActionRE is what a service's action may be: a segment of its
	// POST's path, which every request of the step carries.
	serviceActionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:~-]{0,127}$`)
)

// MaxActionBytes is the longest service action (a step's action:) a
// workflow may name: every request of its step carries it
// (message.MaxEnvelopeBytes).
const MaxActionBytes = 128

// specReader turns a fileSpec into a Definition, gathering problems.
type specReader struct {
	f      fileSpec
	opts   Options
	ps     Problems
	used   map[string]bool // agents some action calls
	seen   map[string]bool // action names
	events map[string]bool // events some step waits for
}

func (r *specReader) add(field, format string, args ...any) {
	r.ps = append(r.ps, Problem{Field: field, What: fmt.Sprintf(format, args...)})
}

func (f fileSpec) definition(o Options) (Definition, Problems) {
	r := &specReader{f: f, opts: o, used: map[string]bool{}, seen: map[string]bool{}, events: map[string]bool{}}
	d := Definition{Name: f.Name, Deadline: f.Deadline.Duration, PickupTimeout: f.PickupTimeout.Duration,
		AgentSpecs: map[string]Agent{}}
	if !workflowNameRE.MatchString(f.Name) {
		r.add("name", "%q: a workflow's name is 1-40 lower-case letters, digits or -, starting with a letter", f.Name)
	}
	d.IDField = r.idField(f.ID)
	d.Deadline = r.positive("deadline", f.Deadline, DefaultOrderDeadline)
	d.PickupTimeout = r.positive("pickupTimeout", f.PickupTimeout, DefaultPickupTimeout)
	if f.ResultLimit.set {
		if f.ResultLimit.n < 1 || f.ResultLimit.n > MaxResultLimit {
			r.add("resultLimit", "%d bytes: a result limit is 1 byte to %dMB", f.ResultLimit.n, MaxResultLimit>>20)
		}
		d.ResultLimit = f.ResultLimit.n
	}
	for _, name := range sortedKeys(f.Agents) {
		d.AgentSpecs[name] = r.agent(name, f.Agents[name])
	}
	if len(f.Steps) == 0 {
		r.add("steps", "a workflow needs at least one step")
	}
	for i, s := range f.Steps {
		st := r.step(i, s)
		r.needs(fmt.Sprintf("steps[%d]", i), s, &st)
		d.Steps = append(d.Steps, st)
	}
	r.graph(&d)
	for _, name := range sortedKeys(f.Agents) {
		if !r.used[name] {
			r.add("agents."+name, "agent %q is declared but no step or undo action calls it", name)
		}
	}
	d.Version = d.version()
	d.Search = r.search(f.Search) // not part of the version: it changes what is kept of an order, not what runs
	d.Migrate = Migration{Rename: f.Migrate.Rename, Skip: f.Migrate.Skip, NewUndo: f.Migrate.NewUndo, Keep: f.Migrate.Keep,
		Transform: Transform{Order: f.Migrate.Transform.Order, Results: f.Migrate.Transform.Results}}
	r.ps = append(r.ps, d.Migrate.check(d)...)
	return d, r.ps
}

func (r *specReader) positive(field string, d duration, def time.Duration) time.Duration {
	switch {
	case !d.set:
		return def
	case d.Duration <= 0:
		r.add(field, "must be positive, not %s", d.Duration)
	}
	return d.Duration
}

func (r *specReader) step(i int, s stepSpec) Step {
	path := fmt.Sprintf("steps[%d]", i)
	if s.Wait != nil || s.Sleep.set || s.Until != "" {
		if s.OnFailure != "" || s.HoldFor.set {
			r.add(path+".onFailure", "step %q waits or sleeps: only a step that calls an agent holds on failure", s.Name)
		}
		return r.parked(path, s)
	}
	st := Step{Action: r.action(path, s.actionSpec, "", s.Async)}
	switch {
	case s.Undo != nil && s.Undo.none:
		st.NoUndo = true
	case s.Undo != nil:
		u := r.action(path+".undo", s.Undo.actionSpec, st.Agent, false)
		st.Undo = &u
	}
	st.HoldFor = r.hold(path, s)
	return st
}

// hold reads a step's onFailure and holdFor: how long its failure holds the
// order for the operator (0: it is undone at once).
func (r *specReader) hold(path string, s stepSpec) time.Duration {
	switch s.OnFailure {
	case "", "undo":
		if s.HoldFor.set {
			r.add(path+".holdFor", "step %q: holdFor goes with onFailure: hold", s.Name)
		}
		return 0
	case "hold":
	default:
		r.add(path+".onFailure", "%q: a step's failure undoes the order (undo, the default) or holds it for the operator (hold)", s.OnFailure)
		return 0
	}
	hold := r.positive(path+".holdFor", s.HoldFor, r.deadline())
	if hold > r.deadline() {
		// Its results are kept for twice the deadline from their writing:
		// a longer hold could go on without them.
		r.add(path+".holdFor", "step %q holds for %s, longer than the order's deadline (%s)", s.Name, hold, r.deadline())
	}
	return hold
}

// needs reads a step's needs: and forEach:.
func (r *specReader) needs(path string, s stepSpec, st *Step) {
	if s.Needs != nil {
		st.Needs = slices.Clone(*s.Needs)
		st.NoNeeds = len(st.Needs) == 0
		if st.NoNeeds {
			st.Needs = nil
		}
	}
	if s.ForEach == "" {
		return
	}
	st.ForEach = s.ForEach
	switch {
	case st.Kind() != KindAgent:
		r.add(path+".forEach", "step %q waits or sleeps: only a step that calls an agent runs per item", s.Name)
	case !forEachRE.MatchString(s.ForEach) && !forEachPathRE.MatchString(s.ForEach):
		r.add(path+".forEach", "%q: name an array field of the order (items), or give a jq path to one (.booking.passengers, .legs[0].seats)", s.ForEach)
	case !forEachRE.MatchString(s.ForEach):
		code, err := compileJQ(s.ForEach)
		if err != nil {
			r.add(path+".forEach", "%v", err)
		}
		st.forEach = code
	}
}

// action reads a step or undo action, the file's defaults filling what it
// leaves out (an undo's agent defaults to its step's). An async action's
// timeout bounds the wait for its service's callback, not its agent
// function's run.
func (r *specReader) action(path string, a actionSpec, agent string, async bool) Action {
	def := r.f.Defaults
	out := Action{Name: a.Name, Agent: cmp.Or(a.Agent, agent), Do: a.Action, Async: async,
		Timeout: cmp.Or(a.Timeout.Duration, def.Timeout.Duration), MaxFailures: cmp.Or(a.MaxFailures, def.MaxFailures, DefaultMaxFailures),
		RetryBackoff: cmp.Or(a.RetryBackoff.Duration, def.RetryBackoff.Duration)}
	switch {
	case !actionNameRE.MatchString(a.Name):
		r.add(path+".name", "%q: a name is 1-64 letters, digits or _.- (it is part of the idempotency key)", a.Name)
	case r.seen[a.Name]:
		r.add(path+".name", "duplicate step %q: every step and undo action needs its own name", a.Name)
	}
	r.seen[a.Name] = true
	if a.Action != "" && !serviceActionRE.MatchString(a.Action) {
		r.add(path+".action", "%q: an action is 1-%d letters, digits or _.:~- (the last segment of its POST's path, "+
			"carried by every request of the step)", a.Action, MaxActionBytes)
	}
	if _, ok := r.f.Agents[out.Agent]; !ok {
		r.add(path+".agent", "unknown agent %q: declare it under agents", out.Agent)
	}
	r.used[out.Agent] = true
	switch {
	case out.Timeout <= 0:
		r.add(path+".timeout", "step %q has no timeout (set it, or defaults.timeout)", a.Name)
	case !async && r.opts.MaxStepTimeout > 0 && out.Timeout > r.opts.MaxStepTimeout:
		r.add(path+".timeout", "step %q's timeout %s is longer than its agent function allows (%s: its timeout less the time to reply)",
			a.Name, out.Timeout, r.opts.MaxStepTimeout)
	}
	if out.MaxFailures < 1 {
		r.add(path+".maxFailures", "step %q needs a failure threshold of at least 1", a.Name)
	}
	if out.RetryBackoff < 0 {
		r.add(path+".retryBackoff", "step %q has a negative retry backoff", a.Name)
	}
	if a.Input != "" {
		code, err := compileJQ(a.Input)
		if err != nil {
			r.add(path+".input", "%v", err)
		}
		out.Input, out.input = a.Input, code
	}
	return out
}

func (r *specReader) agent(name string, a agentSpec) Agent {
	path := "agents." + name
	out := Agent{Name: name, Timeout: cmp.Or(a.Timeout.Duration, DefaultAgentTimeout), Transient: a.Transient, Refuse: a.Refuse,
		Custom: a.Custom, Concurrency: a.Concurrency, MemoryMB: a.Memory}
	if !agentNameRE.MatchString(name) {
		r.add(path, "%q: an agent's name is 1-25 lower-case letters, digits or -, starting with a letter", name)
	}
	if a.RateLimit != "" {
		rate, err := parseRate(a.RateLimit)
		if err != nil {
			r.add(path+".rateLimit", "%v", err)
		}
		out.RateLimit = rate
	}
	switch b := a.RateBurst; {
	case b != 0 && a.RateLimit == "":
		r.add(path+".rateBurst", "a burst goes with a rateLimit")
	case b < 0 || b > MaxBurst:
		r.add(path+".rateBurst", "%d: a burst is 1 to %d calls", b, MaxBurst)
	default:
		out.RateLimit.Burst = b
	}
	if a.PerKey != nil {
		out.PerKey = r.perKey(path+".perKey", *a.PerKey)
	}
	if c := a.Concurrency; c != 0 && (c < MinConcurrency || c > MaxConcurrency) {
		r.add(path+".concurrency", "%d: an agent's concurrency (its event source mapping's MaximumConcurrency) is %d to %d",
			c, MinConcurrency, MaxConcurrency)
	}
	if m := a.Memory; m != 0 && (m < MinMemoryMB || m > MaxMemoryMB) {
		r.add(path+".memory", "%d: an agent's memory (its function's, in MB) is %d to %d", m, MinMemoryMB, MaxMemoryMB)
	}
	r.statuses(path+".transient", a.Transient)
	r.statuses(path+".refuse", a.Refuse)
	for i, c := range a.Refuse {
		if slices.Contains(a.Transient, c) {
			r.add(fmt.Sprintf("%s.refuse[%d]", path, i), "%d is also transient: a status is retried or refuses the step, not both", c)
		}
	}
	if a.Custom {
		if a.Endpoint != "" || a.Auth != nil || a.Transient != nil || a.Refuse != nil {
			r.add(path, "a custom agent (Go code) has no endpoint, auth, transient or refuse: its code decides")
		}
		return out
	}
	out.Endpoint = r.endpoint(path+".endpoint", a.Endpoint)
	if a.Auth != nil {
		out.Auth = r.auth(path+".auth", *a.Auth)
	}
	return out
}

// perKey reads an agent's calls in flight per key.
func (r *specReader) perKey(path string, p perKeySpec) *PerKey {
	out := &PerKey{Key: p.Key, InFlight: cmp.Or(p.InFlight, 1)}
	if p.Key == "" {
		r.add(path+".key", "perKey needs a key: a jq expression over the step's document, such as .order.customer")
	} else if code, err := compileJQ(p.Key); err != nil {
		r.add(path+".key", "%v", err)
	} else {
		out.code = code
	}
	if p.InFlight < 0 || p.InFlight > MaxInFlightPerKey {
		r.add(path+".inFlight", "%d: calls in flight per key are 1 to %d", p.InFlight, MaxInFlightPerKey)
	}
	return out
}

// statuses checks a list of HTTP error statuses.
func (r *specReader) statuses(path string, codes []int) {
	for i, c := range codes {
		if c < 400 || c > 599 {
			r.add(fmt.Sprintf("%s[%d]", path, i), "%d is not an HTTP error status (400-599)", c)
		}
	}
}

// endpoint checks an endpoint as written; one with ${NAME}s is checked
// once Resolve fills them.
func (r *specReader) endpoint(path, raw string) string {
	if raw == "" {
		r.add(path, "an HTTP agent needs an endpoint (the base URL its actions are POSTed under), or custom: true")
	} else if what := checkURL(raw); what != "" {
		r.add(path, "%s", what)
	}
	return raw
}

func (r *specReader) auth(path string, a authSpec) *Auth {
	out := &Auth{Header: a.Header, Prefix: a.Prefix, Secret: a.Secret, Parameter: a.Parameter}
	n := 0
	for _, set := range []bool{a.Secret != "", a.Parameter != "", a.SigV4 != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		r.add(path, "say one of secret (Secrets Manager), parameter (SSM SecureString) or sigv4")
	case a.SigV4 != nil && (a.SigV4.Service == "" || a.SigV4.Region == ""):
		r.add(path+".sigv4", "sigv4 needs a service (execute-api, lambda) and a region")
	case a.SigV4 != nil:
		out.SigV4 = &SigV4{Service: a.SigV4.Service, Region: a.SigV4.Region, Resource: a.SigV4.Resource}
	case a.Header == "":
		r.add(path+".header", "the header the secret goes in (Authorization, X-Api-Key)")
	}
	return out
}

// version is a short hash of what the definition runs: the same steps,
// timeouts and deadlines, the same version.
func (d Definition) version() string {
	b, _ := json.Marshal(struct {
		Name             string
		Steps            []Step
		Pickup, Deadline time.Duration
		ResultLimit      int             `json:",omitempty"`
		Schema           json.RawMessage `json:",omitempty"`
		IDField          string          `json:",omitempty"` // none: the default (and the versions of before)
	}{d.Name, d.Steps, d.PickupTimeout, d.Deadline, d.ResultLimit, d.Schema, d.IDField})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:4])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var eventNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// parked reads a step that calls no agent: a wait for an event, or a timer.
func (r *specReader) parked(path string, s stepSpec) Step {
	st := Step{Action: Action{Name: s.Name, MaxFailures: 1}}
	switch {
	case !actionNameRE.MatchString(s.Name):
		r.add(path+".name", "%q: a name is 1-64 letters, digits or _.- (it is part of the idempotency key)", s.Name)
	case r.seen[s.Name]:
		r.add(path+".name", "duplicate step %q: every step and undo action needs its own name", s.Name)
	}
	r.seen[s.Name] = true
	kinds := 0
	for _, set := range []bool{s.Wait != nil, s.Sleep.set, s.Until != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		r.add(path, "step %q: say one of wait, sleep or until", s.Name)
	}
	for field, set := range map[string]bool{"agent": s.Agent != "", "action": s.Action != "", "input": s.Input != "",
		"async": s.Async, "undo": s.Undo != nil, "timeout": s.Timeout.set, "maxFailures": s.MaxFailures != 0,
		"retryBackoff": s.RetryBackoff.set} {
		if set {
			r.add(path+"."+field, "step %q waits or sleeps: it calls no agent, so it has no %s", s.Name, field)
		}
	}
	switch {
	case s.Wait != nil:
		st.Wait = r.wait(path+".wait", *s.Wait)
		st.Timeout = st.Wait.Timeout
	case s.Sleep.set:
		switch deadline := r.deadline(); {
		case s.Sleep.Duration <= 0:
			r.add(path+".sleep", "must be positive, not %s", s.Sleep.Duration)
		case s.Sleep.Duration >= deadline:
			r.add(path+".sleep", "%s is not shorter than the order's deadline (%s), which would fail the order first: raise deadline",
				s.Sleep.Duration, deadline)
		}
		st.Sleep = &Sleep{For: s.Sleep.Duration}
	default:
		code, err := compileJQ(s.Until)
		if err != nil {
			r.add(path+".until", "%v", err)
		}
		st.Sleep = &Sleep{Until: s.Until, until: code}
	}
	return st
}

// deadline is the file's order deadline (or the default).
func (r *specReader) deadline() time.Duration {
	if !r.f.Deadline.set {
		return DefaultOrderDeadline
	}
	return r.f.Deadline.Duration
}

// senderRE is an SQS SenderId as a wait may name it.
var senderRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._@+=,-]{0,127}$`)

func (r *specReader) wait(path string, w waitSpec) *Wait {
	out := &Wait{Event: w.Event, Timeout: w.Timeout.Duration, Senders: w.Senders}
	for i, s := range w.Senders {
		if !senderRE.MatchString(s) {
			r.add(fmt.Sprintf("%s.senders[%d]", path, i), "%q is not an SQS SenderId (an IAM user's or role's unique id, AIDA... or AROA..., or role-id:session)", s)
		}
	}
	switch {
	case !eventNameRE.MatchString(w.Event):
		r.add(path+".event", "%q: an event's name is 1-64 letters, digits or _.-, starting with a letter", w.Event)
	case r.events[w.Event]:
		r.add(path+".event", "event %q is waited for by another step: each event is waited for once", w.Event)
	}
	r.events[w.Event] = true
	deadline := r.deadline()
	switch {
	case w.Timeout.set && w.Timeout.Duration <= 0:
		r.add(path+".timeout", "must be positive, not %s", w.Timeout.Duration)
	case w.Timeout.Duration > deadline:
		r.add(path+".timeout", "%s is longer than the order's deadline (%s), which would fail the order first: raise deadline",
			w.Timeout.Duration, deadline)
	}
	switch w.OnTimeout {
	case "", "fail":
	case "continue":
		out.Continue = true
	default:
		r.add(path+".onTimeout", "%q: say fail (the default: the step fails for good) or continue", w.OnTimeout)
	}
	return out
}
