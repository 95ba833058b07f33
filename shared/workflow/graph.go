package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// A workflow's steps form a graph: each step needs the steps its needs:
// names (as a CI workflow's jobs do), or, when it says nothing, the step
// before it, so a file without needs: is a line of steps run one after the
// other. The steps whose needs are all done run at once. A step may also run
// once per item of an array of the order (forEach:), each item a record of
// its own with its own claim, attempt, result and undo.

// Limits that keep an order's state item, which holds a record per step,
// undo action and item, well within DynamoDB's 400 KB item limit (a record
// takes about 150 bytes, so the largest order is about 60 KB: see
// docs/design.md) and its writes affordable.
const (
	MaxSteps        = 50  // steps of a workflow
	MaxForEachItems = 100 // items of one forEach step, checked at Submission
	MaxRecords      = 400 // records of one order: steps, items and undo actions
)

var forEachRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// forEachPathRE is a forEach's jq path: fields and array indexes only, so it
// gives one value (.booking.passengers, .legs[0].seats).
var forEachPathRE = regexp.MustCompile(`^(\.[A-Za-z_][A-Za-z0-9_]{0,63}(\[[0-9]{1,3}\])*){1,8}$`)

// Needs are the steps step i waits for, by index: those its needs: names, or
// the step before it (none for the first).
func (d Definition) Needs(i int) []int {
	st := d.Steps[i]
	if st.Needs == nil && !st.NoNeeds {
		if i == 0 {
			return nil
		}
		return []int{i - 1}
	}
	out := make([]int, 0, len(st.Needs))
	for _, n := range st.Needs {
		if j := d.Index(n); j >= 0 {
			out = append(out, j)
		}
	}
	return out
}

// Index is the position of the step named name, or -1.
func (d Definition) Index(name string) int {
	return slices.IndexFunc(d.Steps, func(s Step) bool { return s.Name == name })
}

// Linear reports whether the steps run one after the other, one record
// each: every step needs the one before it alone, and none runs per item.
func (d Definition) Linear() bool {
	for i, st := range d.Steps {
		if st.Kept != "" {
			continue // done before the move, never run: no part of the line
		}
		if st.ForEach != "" || !slices.Equal(d.Needs(i), d.lineNeeds(i)) {
			return false
		}
	}
	return true
}

func (d Definition) lineNeeds(i int) []int {
	if i == 0 {
		return []int{}
	}
	return []int{i - 1}
}

// Levels groups the steps by when they can start: level 0 needs nothing,
// and each other step is one level after the latest of its needs.
func (d Definition) Levels() [][]int {
	level := make([]int, len(d.Steps))
	for _, i := range d.order() {
		for _, j := range d.Needs(i) {
			level[i] = max(level[i], level[j]+1)
		}
	}
	var out [][]int
	for i, l := range level {
		for len(out) <= l {
			out = append(out, nil)
		}
		out[l] = append(out[l], i)
	}
	return out
}

// order is the steps in an order that puts every step after its needs
// (the definition has no cycle: its file was validated).
func (d Definition) order() []int {
	var out []int
	state := make([]int, len(d.Steps)) // 0 unseen, 1 visiting, 2 done
	var visit func(i int)
	visit = func(i int) {
		if state[i] != 0 {
			return
		}
		state[i] = 1
		for _, j := range d.Needs(i) {
			visit(j)
		}
		state[i] = 2
		out = append(out, i)
	}
	for i := range d.Steps {
		visit(i)
	}
	return out
}

// Dependents are the steps that need step i.
func (d Definition) Dependents(i int) []int {
	var out []int
	for j := range d.Steps {
		if slices.Contains(d.Needs(j), i) {
			out = append(out, j)
		}
	}
	return out
}

// graph checks the steps' needs: every name a step of the workflow, not the
// step itself, not twice; no cycle; and the limits.
func (r *specReader) graph(d *Definition) {
	if len(d.Steps) > MaxSteps {
		r.add("steps", "%d steps: a workflow has at most %d", len(d.Steps), MaxSteps)
	}
	records := 0
	for i, st := range d.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		seen := map[string]bool{}
		for k, n := range st.Needs {
			field := fmt.Sprintf("%s.needs[%d]", path, k)
			switch {
			case n == st.Name:
				r.add(field, "step %q needs itself", st.Name)
			case d.Index(n) < 0:
				r.add(field, "unknown step %q: needs names steps of this workflow", n)
			case seen[n]:
				r.add(field, "step %q is named twice", n)
			}
			seen[n] = true
		}
		n := 1
		if st.ForEach != "" {
			n = MaxForEachItems
		}
		if st.Undo != nil {
			n *= 2
		}
		records += n
	}
	if records > MaxRecords {
		r.add("steps", "up to %d records (steps, items and undo actions): an order has at most %d", records, MaxRecords)
	}
	for _, cycle := range d.cycles() {
		names := make([]string, len(cycle))
		for k, i := range cycle {
			names[k] = d.Steps[i].Name
		}
		r.add(fmt.Sprintf("steps[%d].needs", cycle[0]), "steps %s need each other in a cycle: none of them could ever start",
			strings.Join(append(names, names[0]), " → "))
	}
	for _, i := range d.unreachable() {
		r.add(fmt.Sprintf("steps[%d].needs", i), "step %q needs a step that can never run (a cycle): it is unreachable", d.Steps[i].Name)
	}
}

// cycles are the groups of steps that need each other (the strongly
// connected components of the needs graph with more than one step, found
// with Tarjan's algorithm), each in step order.
func (d Definition) cycles() [][]int {
	n := len(d.Steps)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var connect func(v int)
	connect = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range d.Needs(v) {
			switch {
			case index[w] < 0:
				connect(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			slices.Sort(scc)
			out = append(out, scc)
		}
	}
	for v := range n {
		if index[v] < 0 {
			connect(v)
		}
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

// unreachable are the steps not in a cycle that need, directly or not, a
// step in one.
func (d Definition) unreachable() []int {
	inCycle := map[int]bool{}
	for _, c := range d.cycles() {
		for _, i := range c {
			inCycle[i] = true
		}
	}
	memo := map[int]bool{}
	var blocked func(i int) bool
	blocked = func(i int) bool { // i is in no cycle: the steps it needs outside one form no cycle either
		if v, ok := memo[i]; ok {
			return v
		}
		b := false
		for _, j := range d.Needs(i) {
			if j != i && (inCycle[j] || blocked(j)) {
				b = true
			}
		}
		memo[i] = b
		return b
	}
	var out []int
	for i := range d.Steps {
		if !inCycle[i] && blocked(i) {
			out = append(out, i)
		}
	}
	return out
}

// Items counts the items of each forEach step in the order: the length of
// the array its forEach names. An order without that array, or with none or
// more than MaxForEachItems items in it, cannot run the workflow: the error
// says why.
func (d Definition) Items(order json.RawMessage) (map[int]int, error) {
	out := map[int]int{}
	for i, st := range d.Steps {
		if st.ForEach == "" {
			continue
		}
		items, err := forEachArray(order, st)
		if err != nil {
			return nil, err
		}
		if len(items) < 1 || len(items) > MaxForEachItems {
			return nil, fmt.Errorf("step %s runs once per item of the order's %q: %d items, want 1 to %d",
				st.Name, st.ForEach, len(items), MaxForEachItems)
		}
		out[i] = len(items)
	}
	return out, nil
}

// forEachArray is the array of the order a forEach step runs over: the
// field it names, or what its jq path gives. Item k is the array's k-th
// element, counting from 1.
func forEachArray(order json.RawMessage, st Step) ([]json.RawMessage, error) {
	var raw json.RawMessage
	if forEachRE.MatchString(st.ForEach) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(order, &fields); err != nil {
			return nil, fmt.Errorf("the order is not a JSON object: %w", err)
		}
		raw = fields[st.ForEach]
	} else {
		code := st.forEach
		if code == nil {
			var err error
			if code, err = compileJQ(st.ForEach); err != nil {
				return nil, fmt.Errorf("step %s's forEach: %w", st.Name, err)
			}
		}
		var err error
		if raw, err = evalJSON(code, order, "forEach "+st.ForEach); err != nil {
			return nil, fmt.Errorf("step %s runs once per item of the order's %q: %w", st.Name, st.ForEach, err)
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, fmt.Errorf("step %s runs once per item of the order's %q, which is not an array", st.Name, st.ForEach)
	}
	return items, nil
}

// Item is item k (1-based) of the order's array that forEach step i runs
// over.
func (d Definition) Item(order json.RawMessage, i, k int) (json.RawMessage, error) {
	items, err := forEachArray(order, d.Steps[i])
	if err != nil || k < 1 || k > len(items) {
		return nil, fmt.Errorf("step %s: the order has no item %d in %q", d.Steps[i].Name, k, d.Steps[i].ForEach)
	}
	return items[k-1], nil
}

// RecordsOf are the records step i has in an order with items: one, or one
// per item.
func RecordsOf(i int, items map[int]int) []Ref {
	n, ok := items[i]
	if !ok {
		return []Ref{{Index: i}}
	}
	out := make([]Ref, n)
	for k := range n {
		out[k] = Ref{Index: i, Item: k + 1}
	}
	return out
}

// Starts are the records ready when an order starts: those of the steps
// that need nothing (but a kept step: it never runs).
func (d Definition) Starts(items map[int]int) []Ref {
	var out []Ref
	for i := range d.Steps {
		if d.starts(i) {
			out = append(out, RecordsOf(i, items)...)
		}
	}
	return out
}

// starts reports whether step i is ready when a round of an order starts:
// it needs nothing, and is no step kept from an earlier version.
func (d Definition) starts(i int) bool {
	return len(d.Needs(i)) == 0 && d.Steps[i].Kept == ""
}

// allFinished reports whether every step is finished but the kept ones
// (done before a move, in an earlier round if the order was resubmitted
// since: they never run again).
func (d Definition) allFinished(finished map[int]bool) bool {
	for i, st := range d.Steps {
		if !finished[i] && st.Kept == "" {
			return false
		}
	}
	return true
}
