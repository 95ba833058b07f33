package workflow

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
)

// Set is the workflows one deployment runs, by name; the first is the
// default, run by an order that names none. Their agents are shared: an
// agent two workflows call is one service, declared alike in both.
type Set struct {
	defs []Definition
}

// NewSet makes a set of definitions: at least one, distinct names, and any
// agent they share declared alike.
func NewSet(defs ...Definition) (Set, error) {
	if len(defs) == 0 {
		return Set{}, errors.New("workflow: a deployment needs at least one workflow")
	}
	var ps Problems
	agents := map[string]Definition{}
	for i, d := range defs {
		if j := slices.IndexFunc(defs[:i], func(o Definition) bool { return o.Name == d.Name }); j >= 0 {
			ps = append(ps, Problem{File: d.File, Line: d.lines.of("name"), Field: "name",
				What: fmt.Sprintf("workflow %q is also defined in %s", d.Name, defs[j].source())})
		}
		for _, name := range sortedKeys(d.AgentSpecs) {
			if o, ok := agents[name]; ok && !reflect.DeepEqual(o.AgentSpecs[name], d.AgentSpecs[name]) {
				ps = append(ps, Problem{File: d.File, Line: d.lines.of("agents." + name), Field: "agents." + name,
					What: fmt.Sprintf("agent %q is declared differently in %s: one service, one declaration", name, o.source())})
			}
			if _, ok := agents[name]; !ok {
				agents[name] = d
			}
		}
	}
	if len(ps) > 0 {
		return Set{}, ps
	}
	return Set{defs: slices.Clone(defs)}, nil
}

// MustSet is NewSet for definitions known to be good (tests, examples).
func MustSet(defs ...Definition) Set {
	s, err := NewSet(defs...)
	if err != nil {
		panic(err)
	}
	return s
}

// LoadFiles reads, parses and validates workflow files into a set, the
// first file's workflow the default. The error is Problems: every problem of
// every file. Warnings are left out (ValidateFiles has them).
func LoadFiles(paths []string, o Options) (Set, error) {
	s, _, err := ValidateFiles(paths, o)
	return s, err
}

// ValidateFiles is LoadFiles that also returns every file's warnings
// (Definition.Warnings), those of a file with problems too, file by file.
func ValidateFiles(paths []string, o Options) (Set, Problems, error) {
	var defs []Definition
	var ps, warnings Problems
	for _, p := range paths {
		d, err := LoadFile(p, o)
		warnings = append(warnings, d.Warnings...)
		if e := AsProblems(err); e != nil {
			ps = append(ps, e...)
			continue
		}
		if err != nil {
			return Set{}, warnings, err
		}
		defs = append(defs, d)
	}
	if len(ps) > 0 {
		return Set{}, warnings, ps
	}
	s, err := NewSet(defs...)
	return s, warnings, err
}

// IsZero reports whether the set has no workflow.
func (s Set) IsZero() bool { return len(s.defs) == 0 }

// Default is the workflow an order that names none runs.
func (s Set) Default() Definition { return s.defs[0] }

// Definitions are the set's workflows, the default first.
func (s Set) Definitions() []Definition { return slices.Clone(s.defs) }

// Names are the set's workflow names, the default first.
func (s Set) Names() []string {
	out := make([]string, len(s.defs))
	for i, d := range s.defs {
		out[i] = d.Name
	}
	return out
}

// Get returns the named workflow ("" names the default).
func (s Set) Get(name string) (Definition, bool) {
	if name == "" && len(s.defs) > 0 {
		return s.defs[0], true
	}
	i := slices.IndexFunc(s.defs, func(d Definition) bool { return d.Name == name })
	if i < 0 {
		return Definition{}, false
	}
	return s.defs[i], true
}

// Version returns the named workflow if the set runs that version of it.
func (s Set) Version(name, version string) (Definition, bool) {
	d, ok := s.Get(name)
	return d, ok && d.Version == version
}

// Runs reports whether the set runs version of workflow name, or base, the
// version a derived version (an order moved with an undo of the version
// that ran a step kept) is a form of: an order of a version it does not run
// goes on from its stored definition, and an operator should move it
// (sasctl migrate).
func (s Set) Runs(name, version, base string) bool {
	if name == "" {
		return false
	}
	_, ok := s.Version(name, version)
	_, baseOK := s.Version(name, base)
	return ok || (base != "" && baseOK)
}

// Agents are every agent the set's workflows call, in the order first met.
func (s Set) Agents() []string {
	var out []string
	for _, d := range s.defs {
		for _, a := range d.Agents() {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// Agent is how the named agent reaches its service.
func (s Set) Agent(name string) (Agent, bool) {
	for _, d := range s.defs {
		if a, ok := d.AgentSpecs[name]; ok {
			return a, true
		}
	}
	return Agent{}, false
}

// With applies the settings' overrides to every workflow.
func (s Set) With(o Settings) Set {
	out := Set{defs: make([]Definition, len(s.defs))}
	for i, d := range s.defs {
		out.defs[i] = d.With(o)
	}
	return out
}

// Validate checks every workflow against the agents a deployment runs.
func (s Set) Validate(agents []string) error {
	if s.IsZero() {
		return errors.New("workflow: a deployment needs at least one workflow")
	}
	for _, d := range s.defs {
		if err := d.Validate(agents); err != nil {
			return err
		}
	}
	return nil
}

// Vars are the ${NAME}s the set's agent declarations use, sorted.
func (s Set) Vars() []string {
	var out []string
	for _, d := range s.defs {
		out = append(out, d.Vars()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Resolve fills every ${NAME} of the set's agent declarations from vars
// (nil: os.Getenv). The error is Problems: each name not set, each endpoint
// that is then no http(s) URL.
func (s Set) Resolve(vars Vars) (Set, error) {
	out := Set{defs: make([]Definition, len(s.defs))}
	var ps Problems
	for i, d := range s.defs {
		r, err := d.Resolve(vars)
		if e := AsProblems(err); e != nil {
			ps = append(ps, e...)
		}
		out.defs[i] = r
	}
	if len(ps) > 0 {
		return out, ps
	}
	return out, nil
}

// Vars are the ${NAME}s the definition's agent declarations use, sorted.
func (d Definition) Vars() []string {
	var out []string
	for _, a := range d.AgentSpecs {
		out = append(out, a.Vars()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Vars are the ${NAME}s the agent's declaration uses, sorted.
func (a Agent) Vars() []string {
	var out []string
	for _, f := range a.fields() {
		os.Expand(*f.value, func(k string) string { out = append(out, k); return "" })
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Resolve fills every ${NAME} of the definition's agent declarations from
// vars (nil: os.Getenv).
func (d Definition) Resolve(vars Vars) (Definition, error) {
	out := d
	out.AgentSpecs = make(map[string]Agent, len(d.AgentSpecs))
	var ps Problems
	for _, name := range sortedKeys(d.AgentSpecs) {
		a, e := d.resolveAgent(name, vars)
		ps = append(ps, e...)
		out.AgentSpecs[name] = a
	}
	if len(ps) > 0 {
		return out, ps
	}
	return out, nil
}

// ResolveAgent is the named agent's declaration with its ${NAME}s filled
// from vars (nil: os.Getenv): what its Agent needs, and no other agent's.
func (s Set) ResolveAgent(name string, vars Vars) (Agent, error) {
	for _, d := range s.defs {
		if _, ok := d.AgentSpecs[name]; ok {
			a, ps := d.resolveAgent(name, vars)
			if len(ps) > 0 {
				return a, ps
			}
			return a, nil
		}
	}
	return Agent{}, fmt.Errorf("agent %q: no workflow declares it", name)
}

func (d Definition) resolveAgent(name string, vars Vars) (Agent, Problems) {
	if vars == nil {
		vars = os.Getenv
	}
	var ps Problems
	a := d.AgentSpecs[name].clone()
	for _, f := range a.fields() {
		missing := ""
		*f.value = os.Expand(*f.value, func(k string) string {
			v := vars(k)
			if v == "" && missing == "" {
				missing = k
			}
			return v
		})
		field := "agents." + name + "." + f.path
		switch {
		case missing != "":
			ps = append(ps, Problem{File: d.File, Line: d.lines.of(field), Field: field, What: fmt.Sprintf("${%s} is not set", missing)})
		case f.path == "endpoint" && !a.Custom:
			if what := checkURL(*f.value); what != "" {
				ps = append(ps, Problem{File: d.File, Line: d.lines.of(field), Field: field, What: what})
			}
		}
	}
	return a, ps
}

// source names where a definition came from, for a problem's message.
func (d Definition) source() string {
	if d.File != "" {
		return d.File
	}
	return fmt.Sprintf("workflow %q", d.Name)
}

// agentField is one of an agent declaration's strings that may hold ${NAME}s.
type agentField struct {
	path  string
	value *string
}

func (a *Agent) fields() []agentField {
	out := []agentField{{"endpoint", &a.Endpoint}}
	if a.Auth != nil {
		out = append(out, agentField{"auth.secret", &a.Auth.Secret}, agentField{"auth.parameter", &a.Auth.Parameter})
		if a.Auth.SigV4 != nil {
			out = append(out, agentField{"auth.sigv4.region", &a.Auth.SigV4.Region},
				agentField{"auth.sigv4.resource", &a.Auth.SigV4.Resource})
		}
	}
	return out
}

func (a Agent) clone() Agent {
	a.Transient, a.Refuse = slices.Clone(a.Transient), slices.Clone(a.Refuse)
	if a.Auth != nil {
		auth := *a.Auth
		if auth.SigV4 != nil {
			v := *auth.SigV4
			auth.SigV4 = &v
		}
		a.Auth = &auth
	}
	return a
}

// checkURL says what is wrong with an endpoint, or "".
func checkURL(v string) string {
	if strings.Contains(v, "${") {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL", v)
	}
	return ""
}
