package main

import (
	deploy "github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/workflow"
)

// showView is a workflow as sasctl workflow show --output json prints it.
type showView struct {
	File          string       `json:"file"`
	Name          string       `json:"name"`
	Version       string       `json:"version"`
	Deadline      string       `json:"deadline"`
	PickupTimeout string       `json:"pickupTimeout"`
	Steps         []actionView `json:"steps"`
	Agents        []agentView  `json:"agents"`
	Needs         []string     `json:"needs"`
	// Refusals are what the engine does if each step that calls an agent
	// is refused for good (workflow.Definition.UndoPlans).
	Refusals []refusalView `json:"refusals"`
}

// refusalView is what the engine does if a step's service refuses it for
// good, the steps started before it done: the undo actions it runs, in
// order, and how the order ends.
type refusalView struct {
	Step string `json:"step"`
	// HeldFor, for a step with onFailure: hold, is how long the order is
	// held for the operator at most; Undo and Ends follow if it is undone.
	HeldFor string   `json:"heldFor,omitempty"`
	Undo    []string `json:"undo"`
	Ends    string   `json:"ends"`
	// Pivot, for CompensationFailed, is the step that has run and has no
	// undo action: the undoing stops there, for the operator.
	Pivot string `json:"pivot,omitempty"`
}

// actionView is a step or undo action: an agent's call (kind agent), or a
// wait for an event (kind event) or a timer (kind timer), which have no
// agent.
type actionView struct {
	Name         string      `json:"name"`
	Kind         string      `json:"kind"`
	Agent        string      `json:"agent,omitempty"`
	Action       string      `json:"action,omitempty"`
	Async        bool        `json:"async,omitempty"`
	Needs        []string    `json:"needs,omitempty"`   // the steps it waits for (none: the one before; noNeeds: none)
	NoNeeds      bool        `json:"noNeeds,omitempty"` // needs: [], it starts with the order
	ForEach      string      `json:"forEach,omitempty"`
	Input        string      `json:"input,omitempty"`
	Timeout      string      `json:"timeout,omitempty"`
	MaxFailures  int         `json:"maxFailures,omitempty"`
	RetryBackoff string      `json:"retryBackoff,omitempty"`
	OnFailure    string      `json:"onFailure,omitempty"` // hold: its failure holds the order (none: undo, the default)
	HoldFor      string      `json:"holdFor,omitempty"`
	Wait         *waitView   `json:"wait,omitempty"`
	Sleep        *sleepView  `json:"sleep,omitempty"`
	Undo         *actionView `json:"undo,omitempty"`
	// NothingToUndo: the file's undo: none (no pivot); a step that calls
	// an agent with neither this nor an undo is a pivot.
	NothingToUndo bool `json:"nothingToUndo,omitempty"`
	Pivot         bool `json:"pivot,omitempty"`
}

// waitView is a step that waits for an event.
type waitView struct {
	Event     string   `json:"event"`
	Timeout   string   `json:"timeout,omitempty"` // none: the order's deadline bounds it
	OnTimeout string   `json:"onTimeout"`         // fail or continue
	Senders   []string `json:"senders,omitempty"` // the only senders whose event it takes
}

// sleepView is a timer.
type sleepView struct {
	For   string `json:"for,omitempty"`
	Until string `json:"until,omitempty"`
}

// agentView is an agent as declared: ${NAME}s unresolved, no secret.
type agentView struct {
	Name      string    `json:"name"`
	Custom    bool      `json:"custom,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	Timeout   string    `json:"timeout,omitempty"`
	Transient []int     `json:"transient,omitempty"`
	Refuse    []int     `json:"refuse,omitempty"`
	Auth      *authView `json:"auth,omitempty"`
	// Concurrency is its function's most instances at once (0: the
	// deployment's agentConcurrency).
	Concurrency int    `json:"concurrency,omitempty"`
	RateLimit   string `json:"rateLimit,omitempty"` // 50/s, 600/m
	RateBurst   int    `json:"rateBurst,omitempty"`
	// RateMost is the most calls its rate limit admits into any window of
	// its period: the limit, and its burst less one.
	RateMost int         `json:"rateMost,omitempty"`
	PerKey   *perKeyView `json:"perKey,omitempty"`
}

// perKeyView bounds an agent's calls in flight per value of an expression.
type perKeyView struct {
	Key      string `json:"key"`
	InFlight int    `json:"inFlight"`
}

// authView is an agent's auth as declared: where its secret is, not the
// secret.
type authView struct {
	Header    string     `json:"header,omitempty"`
	Prefix    string     `json:"prefix,omitempty"`
	Secret    string     `json:"secret,omitempty"`
	Parameter string     `json:"parameter,omitempty"`
	SigV4     *sigV4View `json:"sigv4,omitempty"`
}

// sigV4View is how an agent signs its requests.
type sigV4View struct {
	Service  string `json:"service"`
	Region   string `json:"region"`
	Resource string `json:"resource,omitempty"`
}

func newShowView(d workflow.Definition) showView {
	v := showView{File: d.File, Name: d.Name, Version: d.Version, Deadline: deploy.ShortDuration(d.Deadline),
		PickupTimeout: deploy.ShortDuration(d.PickupTimeout), Needs: orEmpty(d.Vars())}
	for _, s := range d.Steps {
		st := newStepView(s)
		if s.Undo != nil {
			u := newActionView(*s.Undo)
			st.Undo = &u
		}
		st.NothingToUndo = s.NoUndo
		st.Pivot = s.Kind() == workflow.KindAgent && s.Undo == nil && !s.NoUndo
		st.Needs, st.NoNeeds, st.ForEach = s.Needs, s.NoNeeds, s.ForEach
		if s.HoldFor > 0 {
			st.OnFailure, st.HoldFor = "hold", deploy.ShortDuration(s.HoldFor)
		}
		v.Steps = append(v.Steps, st)
	}
	for _, name := range d.Agents() {
		v.Agents = append(v.Agents, newAgentView(name, d.AgentSpecs[name]))
	}
	v.Refusals = []refusalView{}
	for _, p := range d.UndoPlans() {
		v.Refusals = append(v.Refusals, newRefusalView(d, p))
	}
	return v
}

// newAgentView is an agent as declared, with its flow control.
func newAgentView(name string, a workflow.Agent) agentView {
	v := agentView{Name: name, Custom: a.Custom, Endpoint: a.Endpoint, Transient: a.Transient, Refuse: a.Refuse,
		Concurrency: a.Concurrency}
	if a.Auth != nil {
		v.Auth = newAuthView(*a.Auth)
	}
	if !a.Custom {
		v.Timeout = deploy.ShortDuration(a.Timeout)
	}
	if r := a.RateLimit; r.Calls > 0 {
		v.RateLimit, v.RateBurst, v.RateMost = workflow.Rate{Calls: r.Calls, Per: r.Per}.String(), r.Burst, r.Most()
	}
	if k := a.PerKey; k != nil {
		v.PerKey = &perKeyView{Key: k.Key, InFlight: k.InFlight}
	}
	return v
}

// newRefusalView is plan p of d as the JSON shows it.
func newRefusalView(d workflow.Definition, p workflow.UndoPlan) refusalView {
	v := refusalView{Step: d.Steps[p.Step].Name, Undo: []string{}, Ends: string(p.End)}
	for _, u := range p.Undo {
		v.Undo = append(v.Undo, d.UndoName(u))
	}
	if p.Held {
		v.HeldFor = deploy.ShortDuration(p.HoldFor)
	}
	if p.Pivot != nil {
		v.Pivot = d.Steps[p.Pivot.Index].Name
	}
	return v
}

func newActionView(a workflow.Action) actionView {
	return actionView{Name: a.Name, Kind: "agent", Agent: a.Agent, Action: a.DoName(), Async: a.Async, Input: a.Input,
		Timeout: deploy.ShortDuration(a.Timeout), MaxFailures: a.MaxFailures, RetryBackoff: deploy.ShortDuration(a.RetryBackoff)}
}

// newStepView is a step's view: its action's, or its wait's or timer's.
func newStepView(s workflow.Step) actionView {
	switch {
	case s.Wait != nil:
		w := &waitView{Event: s.Wait.Event, OnTimeout: "fail"}
		if s.Wait.Timeout > 0 {
			w.Timeout = deploy.ShortDuration(s.Wait.Timeout)
		}
		if s.Wait.Continue {
			w.OnTimeout = "continue"
		}
		w.Senders = s.Wait.Senders
		return actionView{Name: s.Name, Kind: string(workflow.KindEvent), Wait: w}
	case s.Sleep != nil:
		v := &sleepView{Until: s.Sleep.Until}
		if s.Sleep.Until == "" {
			v.For = deploy.ShortDuration(s.Sleep.For)
		}
		return actionView{Name: s.Name, Kind: string(workflow.KindTimer), Sleep: v}
	}
	return newActionView(s.Action)
}

func newAuthView(a workflow.Auth) *authView {
	v := &authView{Header: a.Header, Prefix: a.Prefix, Secret: a.Secret, Parameter: a.Parameter}
	if a.SigV4 != nil {
		v.SigV4 = &sigV4View{Service: a.SigV4.Service, Region: a.SigV4.Region, Resource: a.SigV4.Resource}
	}
	return v
}
