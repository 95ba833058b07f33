package remotesim

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Change is an operator's change to the knobs while the simulator runs
// (`sasctl dev faults`, the console): each knob set is set on every service
// (or on Service alone), outages are added, Clear first resets everything.
type Change struct {
	Service   string   `json:"service,omitempty"` // "" for every service
	Clear     bool     `json:"clear,omitempty"`
	Transient *float64 `json:"transient,omitempty"`
	Permanent *float64 `json:"permanent,omitempty"`
	Latency   *string  `json:"latency,omitempty"` // a Go duration, "200ms"
	Outages   []Outage `json:"outages,omitempty"`
}

// Outage makes a service answer 503 for a while, from when it is applied.
type Outage struct {
	Service string `json:"service"`
	For     string `json:"for"` // a Go duration, "2m"
}

// ParseOutage reads "payment:2m".
func ParseOutage(s string) (Outage, error) {
	svc, d, ok := strings.Cut(s, ":")
	o := Outage{Service: strings.TrimSpace(svc), For: strings.TrimSpace(d)}
	if !ok || o.Service == "" {
		return o, fmt.Errorf("outage %q: want SERVICE:DURATION, e.g. payment:2m", s)
	}
	return o, o.check()
}

func (o Outage) check() error {
	d, err := time.ParseDuration(o.For)
	if err != nil || d <= 0 || d > 24*time.Hour {
		return fmt.Errorf("outage of %s: %q is not a duration from 1ms to 24h", o.Service, o.For)
	}
	return nil
}

// Validate says what is wrong with the change, if anything.
func (c Change) Validate() error {
	var errs []error
	for name, v := range map[string]*float64{"transient": c.Transient, "permanent": c.Permanent} {
		if v != nil && (*v < 0 || *v > 1) {
			errs = append(errs, fmt.Errorf("%s: %g is not a share from 0 to 1", name, *v))
		}
	}
	if c.Latency != nil {
		if d, err := time.ParseDuration(*c.Latency); err != nil || d < 0 || d > time.Minute {
			errs = append(errs, fmt.Errorf("latency: %q is not a duration from 0 to 1m", *c.Latency))
		}
	}
	for _, o := range c.Outages {
		if o.Service == "" {
			errs = append(errs, errors.New("an outage needs a service"))
		} else if err := o.check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Apply validates the change and applies it at now; it returns the knobs in
// effect after, by key ("" for every service without knobs of its own).
func (s *Simulator) Apply(c Change, now time.Time) (map[string]Faults, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Clear {
		s.faults = map[string]Faults{}
	}
	for key, f := range s.faults {
		if c.Service == "" || key == c.Service || strings.HasPrefix(key, c.Service+"/") {
			s.faults[key] = c.knobs(f, now)
		}
	}
	if _, ok := s.faults[c.Service]; !ok && c.touchesKnobs() {
		s.faults[c.Service] = c.knobs(s.faults[""], now)
	}
	for _, o := range c.Outages {
		f, ok := s.faults[o.Service]
		if !ok {
			f = s.faults[""] // a service's own knobs replace the shared ones: start from them
		}
		d, _ := time.ParseDuration(o.For)
		f.Outages = append(current(f.Outages, now), Window{From: now, To: now.Add(d)})
		s.faults[o.Service] = f
	}
	return maps.Clone(s.faults), nil
}

func (c Change) touchesKnobs() bool {
	return c.Transient != nil || c.Permanent != nil || c.Latency != nil
}

// knobs is f with the change's knobs set, and its past outages dropped.
func (c Change) knobs(f Faults, now time.Time) Faults {
	if c.Transient != nil {
		f.TransientRate = *c.Transient
	}
	if c.Permanent != nil {
		f.PermanentRate = *c.Permanent
	}
	if c.Latency != nil {
		f.Latency, _ = time.ParseDuration(*c.Latency)
	}
	f.Outages = current(f.Outages, now)
	return f
}

// current are the windows not over at now.
func current(ws []Window, now time.Time) []Window {
	var out []Window
	for _, w := range ws {
		if w.To.After(now) {
			out = append(out, w)
		}
	}
	return out
}

// AllFaults returns the knobs in effect, by key ("" for every service
// without knobs of its own).
func (s *Simulator) AllFaults() map[string]Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.faults)
}

// Describe says in one line what a service's knobs do ("none" for none).
func (f Faults) Describe(now time.Time) string {
	var parts []string
	if f.TransientRate > 0 {
		parts = append(parts, fmt.Sprintf("%g%% transient 503s", 100*f.TransientRate))
	}
	if f.PermanentRate > 0 {
		parts = append(parts, fmt.Sprintf("%g%% refused for good (422)", 100*f.PermanentRate))
	}
	if f.Latency > 0 {
		parts = append(parts, fmt.Sprintf("%s latency", f.Latency))
	}
	if len(f.PermanentOrders) > 0 {
		parts = append(parts, "refuses orders "+strings.Join(f.PermanentOrders, ", "))
	}
	if f.StallRate > 0 || f.StallFirst > 0 || len(f.StallOrders) > 0 {
		parts = append(parts, "stalls some calls")
	}
	for _, w := range current(f.Outages, now) {
		parts = append(parts, fmt.Sprintf("outage until %s (%s left)", w.To.Format("15:04:05"), w.To.Sub(now).Round(time.Second)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// DescribeAll says in words the knobs in effect, by key ("" for every
// service without knobs of its own).
func (s *Simulator) DescribeAll(now time.Time) map[string]string {
	out := map[string]string{}
	for k, f := range s.AllFaults() {
		out[k] = f.Describe(now)
	}
	return out
}

// ApplyForm applies a change given as the fields of a web form (the
// console's faults form): service, clear, transient and permanent (a share
// such as 0.3, or a percentage such as 30%), latency (200ms), outage-service
// and outage-for (2m). An empty field changes nothing.
func (s *Simulator) ApplyForm(form url.Values, now time.Time) error {
	c, err := changeFromForm(form)
	if err != nil {
		return err
	}
	_, err = s.Apply(c, now)
	return err
}

// changeFromForm reads a change from a form's fields, as ApplyForm says.
func changeFromForm(form url.Values) (Change, error) {
	c := Change{Service: strings.TrimSpace(form.Get("service")), Clear: form.Get("clear") != ""}
	for name, dst := range map[string]**float64{"transient": &c.Transient, "permanent": &c.Permanent} {
		v := strings.TrimSpace(form.Get(name))
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			return c, fmt.Errorf("%s: %q is not a number", name, v)
		}
		if strings.HasSuffix(v, "%") {
			f /= 100
		}
		*dst = &f
	}
	if v := strings.TrimSpace(form.Get("latency")); v != "" {
		c.Latency = &v
	}
	if d := strings.TrimSpace(form.Get("outage-for")); d != "" {
		c.Outages = append(c.Outages, Outage{Service: strings.TrimSpace(form.Get("outage-service")), For: d})
	}
	return c, nil
}
