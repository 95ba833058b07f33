package workflow

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// The example workflows, as files: the order (three steps, two undo
// actions), the single step (the cost floor) and a four-step fulfilment
// whose services each authenticate their own way. The tests, `sasctl demo`,
// the bench and the chaos run load them like any team's file.
//
//go:embed examples/*.yaml examples/*.schema.json
var examples embed.FS

// The example workflows' names.
const (
	OrderWorkflow      = "order"      // reserve inventory → charge payment → create shipment
	SingleWorkflow     = "single"     // charge payment, one step
	FulfilmentWorkflow = "fulfilment" // pick items → invoice → award points → book a courier
	ApprovalWorkflow   = "approval"   // reserve → wait for the approval → charge what was approved
	ParallelWorkflow   = "parallel"   // two reservations and an authorization at once → charge → pack each item → ship
)

// ExampleFile is the text of the named example workflow file, whole: the
// schema file it names (beside it in examples/) written in where it names
// it, so a copy of the text parses anywhere.
func ExampleFile(name string) ([]byte, error) {
	b, err := examples.ReadFile(path.Join("examples", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("no example workflow %q (have %s)", name, strings.Join(Examples(), ", "))
	}
	var inlineErr error
	b = schemaLineRE.ReplaceAllFunc(b, func(line []byte) []byte {
		file := schemaLineRE.FindSubmatch(line)[1]
		doc, err := examples.ReadFile(path.Join("examples", string(file)))
		var out bytes.Buffer
		if err == nil {
			err = json.Compact(&out, doc)
		}
		if err != nil {
			inlineErr = err
			return line
		}
		return append([]byte("schema: "), out.Bytes()...)
	})
	return b, inlineErr
}

// schemaLineRE is an example's line that names its schema file.
var schemaLineRE = regexp.MustCompile(`(?m)^schema: ([a-z0-9-]+\.schema\.json)$`)

// Examples are the example workflows' names.
func Examples() []string {
	ents, _ := examples.ReadDir("examples")
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, name)
		}
	}
	return out
}

// Example parses the named example workflow. Its ${NAME}s stay as written,
// for Resolve.
func Example(name string) (Definition, error) {
	b, err := ExampleFile(name)
	if err != nil {
		return Definition{}, err
	}
	return ParseFile("examples/"+name+".yaml", b, Options{})
}

// MustExample is Example for the examples shipped, which parse.
func MustExample(name string) Definition {
	d, err := Example(name)
	if err != nil {
		panic(err)
	}
	return d
}

// Orders is the example order workflow with the settings' overrides:
// reserve inventory → charge payment → create shipment; a failure undoes
// what was done (release the inventory, refund the payment), in reverse.
func Orders(s Settings) Definition { return MustExample(OrderWorkflow).With(s) }

// Single is the example one-step workflow (charge the payment) with the
// settings' overrides.
func Single(s Settings) Definition { return MustExample(SingleWorkflow).With(s) }

// Settings override what workflow files say, for every step of every
// workflow a deployment runs; a zero field overrides nothing. The stack's
// CDK context and the local tools (demo, chaos, bench) set them.
type Settings struct {
	StepTimeout   time.Duration // CompleteBy = claim + StepTimeout, for a call answered at once (an async step keeps its own: it bounds a callback)
	MaxFailures   int           // supervisor recoveries before a step is an Error
	RetryBackoff  time.Duration // base of the supervisor's growing backoff
	PickupTimeout time.Duration // a ready step not claimed by then is looked at: its message may be lost
	OrderDeadline time.Duration // an order not ended by then fails for good
}

// DefaultOrderDeadline bounds an order's run when its file does not.
const DefaultOrderDeadline = 24 * time.Hour

// With returns the definition with the settings' overrides.
func (d Definition) With(s Settings) Definition {
	if s == (Settings{}) {
		return d
	}
	out := d
	out.Steps = make([]Step, len(d.Steps))
	set := func(a Action) Action {
		if s.StepTimeout > 0 && !a.Async {
			a.Timeout = s.StepTimeout
		}
		if s.MaxFailures > 0 {
			a.MaxFailures = s.MaxFailures
		}
		if s.RetryBackoff > 0 {
			a.RetryBackoff = s.RetryBackoff
		}
		return a
	}
	for i, st := range d.Steps {
		out.Steps[i] = st
		if st.Kind() != KindAgent {
			continue // a wait or a timer has no attempts
		}
		out.Steps[i].Action = set(st.Action)
		if st.Undo != nil {
			u := set(*st.Undo)
			out.Steps[i].Undo = &u
		}
	}
	if s.PickupTimeout > 0 {
		out.PickupTimeout = s.PickupTimeout
	}
	if s.OrderDeadline > 0 {
		out.Deadline = s.OrderDeadline
		// A hold is no longer than the deadline, whose results it must
		// keep (its file's by default): a shorter one bounds it too.
		for i := range out.Steps {
			out.Steps[i].HoldFor = min(out.Steps[i].HoldFor, out.Deadline)
		}
	}
	out.Version = out.version()
	return out
}

// Validate checks the overrides.
func (s Settings) Validate() error {
	for name, d := range map[string]time.Duration{"step timeout": s.StepTimeout, "retry backoff": s.RetryBackoff,
		"pickup timeout": s.PickupTimeout, "order deadline": s.OrderDeadline} {
		if d < 0 {
			return fmt.Errorf("workflow settings: %s must not be negative, not %s", name, d)
		}
	}
	if s.MaxFailures < 0 {
		return fmt.Errorf("workflow settings: max failures must not be negative, not %d", s.MaxFailures)
	}
	return nil
}
