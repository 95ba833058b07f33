package workflow

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Which member of an order is its id. A workflow names it (the file's id:,
// Definition.IDField), orderId by default: a loan's applicationId, a
// claim's claimId. This file is the one place that answers it: Submission,
// the typed client, sasctl and the test kit decode an order by the id field
// of the workflow it names (Set.IDField, read by message.DecodeOrder).
//
// The product's own messages (events, cancels, the scheduler's and the
// agents' work, the status messages to a reply queue) and the members it
// keeps beside a claim check or sealed data keep their member orderId: they
// are the product's wire format, not the user's order, and carry the
// order's id whatever its workflow calls it.

// DefaultIDField is the member of an order that is its id when its
// workflow names no other.
const DefaultIDField = "orderId"

// MaxIDFieldBytes bounds a workflow's id field.
const MaxIDFieldBytes = 64

// idFieldRE is an id field: a top-level member of the order whose name a
// jq path reads as it is (.applicationId).
var idFieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ProductMembers are the members of an order the product itself reads
// besides its id: which workflow runs it, where its status goes, and the
// kind that makes a message on the orders queue a cancel or an event. A
// workflow's id field is none of them.
var ProductMembers = []string{"workflow", "replyQueue", "kind"}

// IDMember is the member of the definition's orders that is their id:
// IDField, or DefaultIDField.
func (d Definition) IDMember() string { return cmp.Or(d.IDField, DefaultIDField) }

// IDField is the member of an order that names workflow ("": the default)
// that is its id: that workflow's IDMember. An order of a workflow the set
// does not run (or of any, the set empty: its workflows not known) is read
// by DefaultIDField.
func (s Set) IDField(workflow string) string {
	if d, ok := s.Get(workflow); ok {
		return d.IDMember()
	}
	return DefaultIDField
}

// idField reads the file's id: "" for the default (written or left out:
// the version of a file that says id: orderId is the one that says
// nothing).
func (r *specReader) idField(id string) string {
	if id == "" || id == DefaultIDField {
		return ""
	}
	switch {
	case len(id) > MaxIDFieldBytes || !idFieldRE.MatchString(id):
		r.add("id", "%q: an order's id field is a member of the order (not a path) named by 1-%d letters, digits or _, "+
			"not starting with a digit", id, MaxIDFieldBytes)
	case strings.EqualFold(id, DefaultIDField):
		r.add("id", "%q is %s in another case (a reader that ignores case would take one for the other)", id, DefaultIDField)
	default:
		if i := slices.IndexFunc(ProductMembers, func(m string) bool { return strings.EqualFold(m, id) }); i >= 0 {
			r.add("id", "%q: %s is the product's own member of an order (%s), not an id", id, ProductMembers[i],
				strings.Join(ProductMembers, ", "))
		}
	}
	return id
}

// checkIDField checks the id field a workflow names (id:) against the
// order's schema sch: every order carries it, a string, so the schema
// declares it, as a string. (The default, orderId, is not checked: a file
// valid before workflows named their id fields stays valid.)
func (d Definition) checkIDField(sch *orderSchema) Problems {
	if sch == nil || d.IDField == "" {
		return nil
	}
	field, id := "id", d.IDField
	p := docPath{{Field: id}}
	if r := sch.cannot(p, false); r != nil {
		show := func(q docPath) string {
			if len(q) == 0 {
				return "the order"
			}
			return q.String()
		}
		return Problems{{Field: field, What: fmt.Sprintf("every order carries its id, %s: %s", id, r.explain(p, show))}}
	}
	declared, types := sch.member(id)
	switch {
	case types != nil && !slices.Contains(types, "string"):
		return Problems{{Field: field, What: fmt.Sprintf("the schema makes the order's id, %s, %s: an id is a string", id, typeNames(types))}}
	case !declared || types == nil:
		return Problems{{Field: field, What: fmt.Sprintf(`the schema does not declare the order's id, %s, a string: add "%s": {"type": "string"} to its properties`, id, id)}}
	}
	return nil
}

// member says whether the schema declares the order's top-level member
// name (in its properties, or those of a schema it must also meet: $ref,
// allOf), and the types it allows it (nil: any).
func (o *orderSchema) member(name string) (declared bool, types []string) {
	var walk func(node any, depth int)
	walk = func(node any, depth int) {
		n, ok := node.(map[string]any)
		if !ok || depth > maxSchemaDepth {
			return
		}
		if sub, ok := asMap(n["properties"])[name]; ok {
			declared = true
			if m, ok := sub.(map[string]any); ok {
				types = intersect(types, o.types(m, depth+1))
			}
		}
		if ref, ok := n["$ref"].(string); ok {
			if target, ok := o.resolve(ref); ok {
				walk(target, depth+1)
			}
		}
		for _, sub := range asList(n["allOf"]) {
			walk(sub, depth+1)
		}
	}
	walk(o.root, 0)
	return declared, types
}
