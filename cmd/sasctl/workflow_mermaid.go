package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/sas-go/sas/shared/workflow"
)

// printMermaid prints a flowchart: the steps left to right, the last to
// Processed; each step's undo action on a dashed edge; the undo chain in
// reverse order, ending in Failed. A wait for an event is a hexagon, a
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
// then, for a linear workflow, the undo chain from the last undo action
// back to the first, to Failed (steps that run at once are undone latest
// completion first: no chain is fixed in advance).
func printMermaidUndo(out io.Writer, d workflow.Definition) {
	var chain []string
	for i, s := range d.Steps {
		if s.Undo != nil {
			fmt.Fprintf(out, "  s%d -. undo .-> u%d\n", i+1, i+1)
			chain = append([]string{fmt.Sprintf("u%d", i+1)}, chain...)
		}
	}
	if len(chain) == 0 || !d.Linear() {
		return
	}
	fmt.Fprintf(out, "  failed([\"%s\"])\n", workflow.Failed)
	for i, id := range chain {
		next := "failed"
		if i+1 < len(chain) {
			next = chain[i+1]
		}
		fmt.Fprintf(out, "  %s --> %s\n", id, next)
	}
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
