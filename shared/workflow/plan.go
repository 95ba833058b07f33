package workflow

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// The rules of a workflow whose steps run at once (Definition.Linear is
// false): what a record's completion makes ready, and how an order that
// fails, or is cancelled, is undone. They read the order's records as a
// writer read them; the writer's conditional write must find them so
// (Progress.Read), and, when it does not, reads them again and asks again.
// A linear workflow keeps its own rules (Next, UndoFrom): the same outcome
// for its steps, with no more conditions on its writes.

// Record is what the rules read of one record of an order's round.
type Record struct {
	Ref     Ref
	State   State
	Ready   bool      // Pending and made ready: waiting for its claim (or parked)
	DoneAt  time.Time // when it was Processed, or failed for good
	Kind    Kind
	HasUndo bool // a step's record (or an item's) whose step has an undo
	// Ran: it may have taken effect, and is not Processed: failed for good
	// after an attempt (given up on, or its answer over the result limit),
	// or Pending again after an attempt of it was recovered (its answer
	// lost), which a compensation stops before its retry.
	Ran bool
}

// Active reports whether the record is at work: ready, or claimed.
func (r Record) Active() bool { return r.State == Processing || (r.State == Pending && r.Ready) }

// Records are an order's records, by ref.
type Records map[Ref]Record

// StepDone is how many of a step's records were done as a writer read
// them: its write is conditional on the count being so still.
type StepDone struct{ Step, Done int }

// Progress is what the completion of a record moves on.
type Progress struct {
	Ready []Ref      // the records made ready: every record of each step whose needs are all done now
	End   bool       // every step is done: the order is Processed
	Read  []StepDone // the steps whose progress decided this, as read
}

// Progress is what follows done's completion, the other records as read
// (recs holds done as it was before).
func (d Definition) Progress(recs Records, done Ref) Progress {
	after := maps.Clone(recs)
	r := after[done]
	r.State, r.Ready = Processed, false
	after[done] = r
	var p Progress
	s := done.Index
	if d.Steps[s].ForEach != "" {
		p.Read = append(p.Read, StepDone{s, recs.done(s)}) // its items finish one at a time
	}
	if !after.finished(s) {
		return p
	}
	watch := map[int]bool{}
	for _, t := range d.Dependents(s) {
		ready := true
		for _, n := range d.Needs(t) {
			if n == s || after.finished(n) {
				continue
			}
			ready = false
			if after.active(n) {
				watch[n] = true // its finishing at once with this one must not go unseen
			}
		}
		if ready && !after.started(t) {
			p.Ready = append(p.Ready, after.refs(t)...)
		}
	}
	unfinished, allActive := 0, true
	for i := range d.Steps {
		if !after.finished(i) {
			unfinished++
			allActive = allActive && after.active(i)
		}
	}
	switch {
	case unfinished == 0:
		p.End = true
	case allActive:
		for i := range d.Steps {
			if !after.finished(i) {
				watch[i] = true // the last of them to finish ends the order
			}
		}
	}
	for _, i := range sortedInts(watch) {
		p.Read = append(p.Read, StepDone{i, recs.done(i)})
	}
	return p
}

// Compensation is what the undoing of an order does next.
type Compensation struct {
	Stop  []Ref // forward records ready but not claimed: they will not run
	Await bool  // forward records are claimed: their outcomes come first
	Undo  *Ref  // the undo action to make ready
	// End, when not "", is the order's end: Failed (a cancel makes it
	// Cancelled) once everything done is undone, CompensationFailed when a
	// record that took effect has no undo (Pivot names it).
	End   State
	Pivot Ref
}

// Compensate is what an order being undone does next, its records as read:
// what is ready stops, what is claimed is awaited, then every record that
// took effect (or may have) is undone, the latest done first.
func (recs Records) Compensate() Compensation {
	var c Compensation
	for ref, r := range recs {
		switch {
		case ref.Undo && r.Active():
			return c // an undo action runs: its outcome comes first
		case ref.Undo:
		case r.State == Pending && r.Ready:
			c.Stop = append(c.Stop, ref)
		case r.State == Processing:
			c.Await = true
		}
	}
	slices.SortFunc(c.Stop, compareRefs)
	if c.Await {
		return c
	}
	var todo []Record
	for ref, r := range recs {
		undone := recs[Ref{Index: ref.Index, Undo: true, Item: ref.Item}].State == Processed
		if !ref.Undo && r.Kind == KindAgent && (r.State == Processed || ((r.State == Error || r.State == Pending) && r.Ran)) && !undone {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		c.End = Failed
		return c
	}
	latest := slices.MaxFunc(todo, func(a, b Record) int {
		// a stopped record that may have run (no DoneAt) ran last
		return cmp.Or(boolCmp(a.DoneAt.IsZero(), b.DoneAt.IsZero()), a.DoneAt.Compare(b.DoneAt),
			a.Ref.Index-b.Ref.Index, a.Ref.Item-b.Ref.Item)
	})
	if !latest.HasUndo {
		c.End, c.Pivot = CompensationFailed, latest.Ref
		return c
	}
	c.Undo = &Ref{Index: latest.Ref.Index, Undo: true, Item: latest.Ref.Item}
	return c
}

// refs are the records of step i (one, or one per item).
func (recs Records) refs(i int) []Ref {
	var out []Ref
	for ref := range recs {
		if ref.Index == i && !ref.Undo {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, compareRefs)
	return out
}

// done is how many of step i's records are Processed.
func (recs Records) done(i int) int {
	n := 0
	for _, ref := range recs.refs(i) {
		if recs[ref].State == Processed {
			n++
		}
	}
	return n
}

func (recs Records) finished(i int) bool {
	refs := recs.refs(i)
	return len(refs) > 0 && recs.done(i) == len(refs)
}

func (recs Records) active(i int) bool {
	return slices.ContainsFunc(recs.refs(i), func(r Ref) bool { return recs[r].Active() })
}

// started: some record of step i is at work or done.
func (recs Records) started(i int) bool {
	return slices.ContainsFunc(recs.refs(i), func(r Ref) bool { return recs[r].Active() || recs[r].State != Pending })
}

func compareRefs(a, b Ref) int {
	if a.Undo != b.Undo {
		if a.Undo {
			return 1
		}
		return -1
	}
	return cmp.Or(a.Index-b.Index, a.Item-b.Item)
}

func sortedInts(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for i := range set {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
