package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sas-go/sas/shared/workflow"
)

// printMermaid prints a flowchart: the steps left to right, the last to
// Processed; each step's undo action on a dashed edge; the undo actions in
// the order the engine runs them, to how the order ends (undoEdges). A wait for an event is a hexagon, a
// timer a parallelogram and an async step a subroutine box, each with a
// class of its own (wait, timer, async) styled apart.
func printMermaid(out io.Writer, d workflow.Definition) {
	fmt.Fprintln(out, "flowchart LR")
	classes := map[string][]string{} // the steps of each kind but plain
	for i, s := range d.Steps {
		fmt.Fprintf(out, "  s%d%s\n", i+1, mermaidNode(s))
		if s.Undo != nil {
			fmt.Fprintf(out, "  u%d[%s]\n", i+1, mermaidLabel(s.Undo.Name, s.Undo.Agent, s.Undo.DoName()))
		}
		if k := stepKind(s); k != "step" {
			classes[k] = append(classes[k], fmt.Sprintf("s%d", i+1))
		}
	}
	fmt.Fprintf(out, "  processed([\"%s\"])\n", workflow.Processed)
	for i := range d.Steps {
		for _, j := range d.Needs(i) {
			fmt.Fprintf(out, "  s%d --> s%d\n", j+1, i+1)
		}
		if len(d.Dependents(i)) == 0 {
			fmt.Fprintf(out, "  s%d --> processed\n", i+1)
		}
	}
	printMermaidUndo(out, d)
	for _, k := range []string{"wait", "timer", "async"} {
		if len(classes[k]) > 0 {
			fmt.Fprintf(out, "  classDef %s %s\n  class %s %s\n", k, mermaidStyles[k], strings.Join(classes[k], ","), k)
		}
	}
}

// mermaidStyles set the parked and async steps apart: dashed, in blue.
var mermaidStyles = map[string]string{
	"wait":  "fill:#eef4ff,stroke:#3d6fd1,stroke-dasharray:5 3",
	"timer": "fill:#eef4ff,stroke:#3d6fd1,stroke-dasharray:2 2",
	"async": "fill:#fff,stroke:#3d6fd1,stroke-dasharray:5 3",
}

// mermaidNode is a step's node, its shape after what it does.
func mermaidNode(s workflow.Step) string {
	switch s.Kind() {
	case workflow.KindEvent:
		return "{{" + mermaidLabel(s.Name, "waits for "+parkedAction(s), "timeout "+parkedTimeout(s)) + "}}"
	case workflow.KindTimer:
		return "[/" + mermaidLabel(s.Name, parkedAction(s), "") + "/]"
	}
	name := s.Name
	if s.ForEach != "" {
		name += " ×each " + s.ForEach
	}
	if s.Async {
		return "[[" + mermaidLabel(name, s.Agent+" (answers later)", s.DoName()) + "]]"
	}
	return "[" + mermaidLabel(name, s.Agent, s.DoName()) + "]"
}

// printMermaidUndo draws each undo action on a dashed edge from its step,
// then the undo as the engine runs it (undoEdges).
func printMermaidUndo(out io.Writer, d workflow.Definition) {
	for i, s := range d.Steps {
		if s.Undo != nil {
			fmt.Fprintf(out, "  s%d -. undo .-> u%d\n", i+1, i+1)
		}
	}
	ends, edges := undoEdges(d)
	for _, end := range []workflow.State{workflow.Failed, workflow.CompensationFailed} {
		if ends[end] {
			fmt.Fprintf(out, "  %s([\"%s\"])\n", endNode(end), end)
		}
	}
	for _, e := range edges {
		fmt.Fprintf(out, "  %s\n", e)
	}
}

// undoEdges are the edges of the undo as the engine runs it after each
// step's refusal (workflow.Definition.UndoPlans), each once: from an undo
// action to the next, from the last to how the order ends, and from a
// step that has run and has no undo to CompensationFailed. A refusal that
// undoes nothing draws nothing: the order ends at once. ends are the end
// nodes the edges reach.
func undoEdges(d workflow.Definition) (ends map[workflow.State]bool, edges []string) {
	ends = map[workflow.State]bool{}
	add := func(e string) {
		if !slices.Contains(edges, e) {
			edges = append(edges, e)
		}
	}
	for _, p := range d.UndoPlans() {
		prev := ""
		for _, u := range p.Undo {
			id := fmt.Sprintf("u%d", u.Index+1)
			if prev != "" && prev != id {
				add(prev + " --> " + id)
			}
			prev = id
		}
		if p.Pivot != nil {
			ends[workflow.CompensationFailed] = true
			add(fmt.Sprintf("s%d -. no undo .-> %s", p.Pivot.Index+1, endNode(workflow.CompensationFailed)))
		}
		if prev != "" {
			ends[p.End] = true
			add(prev + " --> " + endNode(p.End))
		}
	}
	return ends, edges
}

// endNode is the node of an order's end.
func endNode(s workflow.State) string {
	if s == workflow.CompensationFailed {
		return "compfailed"
	}
	return strings.ToLower(string(s))
}

// mermaidLabel is a node's label: the record's name, then what does it
// (its agent, what it waits for) and, if it says something else, detail
// (the action its agent asks its service for, a wait's timeout).
func mermaidLabel(name, by, detail string) string {
	label := name + "<br/>" + by
	if detail != "" && detail != name {
		label += ": " + detail
	}
	return `"` + strings.ReplaceAll(label, `"`, "#quot;") + `"`
}
