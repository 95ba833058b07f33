package workflow

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Which paths into the order its JSON Schema can produce. A path is
// refused only where the schema is sure: a field of an object whose
// properties are closed (additionalProperties: false, or
// unevaluatedProperties: false with nothing else naming it) and do not name
// it, a field of a value that cannot be an object, an element of a value
// that can be neither an array nor an object, or a place the schema allows
// nothing (false). $ref (within the document), allOf, anyOf and oneOf are
// followed: a path is refused if any allOf part refuses it, or every anyOf
// (oneOf) alternative does. An open object, a remote $ref or a keyword it
// does not follow (if, not, dependentSchemas) refuses nothing.

// orderSchema is an order's JSON Schema, parsed, for its paths.
type orderSchema struct {
	root any
	id   string // the root's $id: a $ref may name the document by it
	// legacy: a draft-07 (or older) schema, whose $ref's siblings are
	// ignored.
	legacy bool
}

// maxSchemaDepth bounds the walk: a $ref cycle that reads no step of the
// path ends there, refusing nothing.
const maxSchemaDepth = 64

// newOrderSchema parses the schema document doc.
func newOrderSchema(doc json.RawMessage) (*orderSchema, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	o := &orderSchema{root: root}
	if m, ok := root.(map[string]any); ok {
		o.id, _ = m["$id"].(string)
		draft, _ := m["$schema"].(string)
		o.legacy = strings.Contains(draft, "draft-04") || strings.Contains(draft, "draft-06") || strings.Contains(draft, "draft-07")
	}
	return o, nil
}

// refusalKind is why a schema cannot produce a path.
type refusalKind int

const (
	closedObject refusalKind = iota + 1 // the value's properties are closed and do not name the field
	notObject                           // the value cannot be an object, and the path reads a field of it
	notArray                            // the value cannot be an array (or an object), and the path reads an element
	nothing                             // the schema allows nothing there (false)
	noElements                          // the array can have no element
)

// refusal is why the schema cannot produce a path: at is the length of the
// path's prefix whose value it speaks of (for closedObject and notObject,
// the object; the field is the next step).
type refusal struct {
	kind  refusalKind
	at    int
	names []string // closedObject: the fields the object may have
	types []string // notObject, notArray: the types the value may have
}

// cannot is why the schema cannot produce path p of the order, or nil if it
// can; wantArray: the value there must also be able to be an array.
func (o *orderSchema) cannot(p docPath, wantArray bool) *refusal {
	return o.walk(o.root, p, 0, wantArray, 0)
}

// walk is why node, the schema of p[:i]'s value, cannot produce p.
func (o *orderSchema) walk(node any, p docPath, i int, wantArray bool, depth int) *refusal {
	if depth > maxSchemaDepth {
		return nil
	}
	switch n := node.(type) {
	case bool:
		if !n && i > 0 {
			return &refusal{kind: nothing, at: i}
		}
	case map[string]any:
		if r := o.applicators(n, p, i, wantArray, depth); r != nil {
			return r
		}
		if _, isRef := n["$ref"]; isRef && o.legacy {
			return nil
		}
		return o.local(n, p, i, wantArray, depth)
	}
	return nil
}

// applicators is why the schemas n applies in place ($ref, allOf, anyOf,
// oneOf) cannot produce p.
func (o *orderSchema) applicators(n map[string]any, p docPath, i int, wantArray bool, depth int) *refusal {
	if ref, ok := n["$ref"].(string); ok {
		if target, ok := o.resolve(ref); ok {
			if r := o.walk(target, p, i, wantArray, depth+1); r != nil {
				return r
			}
		}
	}
	for _, sub := range asList(n["allOf"]) {
		if r := o.walk(sub, p, i, wantArray, depth+1); r != nil {
			return r
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if subs := asList(n[key]); len(subs) > 0 {
			if r := o.every(subs, p, i, wantArray, depth); r != nil {
				return r
			}
		}
	}
	return nil
}

// every is why none of the alternatives subs can produce p: the refusal
// that goes furthest (nil if one can).
func (o *orderSchema) every(subs []any, p docPath, i int, wantArray bool, depth int) *refusal {
	var best *refusal
	for _, sub := range subs {
		r := o.walk(sub, p, i, wantArray, depth+1)
		if r == nil {
			return nil
		}
		best = best.or(r)
	}
	return best
}

// or is the refusal of two alternatives: the one that goes further; two
// closed objects at one place allow the fields of both.
func (r *refusal) or(s *refusal) *refusal {
	switch {
	case r == nil || s.at > r.at:
		return s
	case s.at == r.at && s.kind == closedObject && r.kind == closedObject:
		names := slices.Concat(r.names, s.names)
		slices.Sort(names)
		return &refusal{kind: closedObject, at: r.at, names: slices.Compact(names)}
	}
	return r
}

// local is why n's own keywords cannot produce p from p[:i].
func (o *orderSchema) local(n map[string]any, p docPath, i int, wantArray bool, depth int) *refusal {
	types := o.types(n, depth)
	switch {
	case i == len(p) && wantArray && types != nil && !slices.Contains(types, "array"):
		return &refusal{kind: notArray, at: i, types: types}
	case i == len(p):
		return nil
	case p[i].Elem:
		return o.element(n, types, p, i, wantArray, depth)
	}
	return o.field(n, types, p, i, wantArray, depth)
}

// field is why n cannot produce p, whose step i is a field.
func (o *orderSchema) field(n map[string]any, types []string, p docPath, i int, wantArray bool, depth int) *refusal {
	if types != nil && !slices.Contains(types, "object") {
		return &refusal{kind: notObject, at: i, types: types}
	}
	f := p[i].Field
	var subs []any
	if sub, ok := asMap(n["properties"])[f]; ok {
		subs = append(subs, sub)
	}
	matched, unsure := patterned(n, f)
	if unsure {
		return nil
	}
	subs = append(subs, matched...)
	if len(subs) == 0 {
		extra, closed := o.additional(n, f, depth)
		if closed {
			return &refusal{kind: closedObject, at: i, names: o.named(n, depth)}
		}
		subs = append(subs, extra)
	}
	for _, sub := range subs {
		if r := o.walk(sub, p, i+1, wantArray, depth+1); r != nil {
			return r
		}
	}
	return nil
}

// patterned are the schemas of n's patternProperties whose pattern matches
// field f; unsure if a pattern is not one Go reads (it may match).
func patterned(n map[string]any, f string) (subs []any, unsure bool) {
	for _, pattern := range sortedKeys(asMap(n["patternProperties"])) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, true
		}
		if re.MatchString(f) {
			subs = append(subs, asMap(n["patternProperties"])[pattern])
		}
	}
	return subs, false
}

// additional is the schema of field f that n's properties do not name:
// additionalProperties, or unevaluatedProperties if no schema n applies in
// place evaluates f; closed if that is false.
func (o *orderSchema) additional(n map[string]any, f string, depth int) (schema any, closed bool) {
	if extra, ok := n["additionalProperties"]; ok {
		return extra, extra == false
	}
	extra, ok := n["unevaluatedProperties"]
	if !ok || o.evaluatedIn(n, f, depth) {
		return nil, false
	}
	return extra, extra == false
}

// inPlace are the schemas n applies to its own value.
func (o *orderSchema) inPlace(n map[string]any) []any {
	var subs []any
	if ref, ok := n["$ref"].(string); ok {
		if target, ok := o.resolve(ref); ok {
			subs = append(subs, target)
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		subs = append(subs, asList(n[key])...)
	}
	for _, key := range []string{"if", "then", "else"} {
		if sub, ok := n[key]; ok {
			subs = append(subs, sub)
		}
	}
	for _, sub := range asMap(n["dependentSchemas"]) {
		subs = append(subs, sub)
	}
	return subs
}

// evaluatedIn reports whether a schema n applies in place evaluates field
// f (names it, or takes every field), so unevaluatedProperties leaves it.
func (o *orderSchema) evaluatedIn(n map[string]any, f string, depth int) bool {
	if depth > maxSchemaDepth {
		return true
	}
	for _, sub := range o.inPlace(n) {
		m, ok := sub.(map[string]any)
		if !ok {
			continue
		}
		matched, unsure := patterned(m, f)
		if _, named := asMap(m["properties"])[f]; named || len(matched) > 0 || unsure {
			return true
		}
		if _, all := m["additionalProperties"]; all {
			return true
		}
		if _, all := m["unevaluatedProperties"]; all {
			return true
		}
		if o.evaluatedIn(m, f, depth+1) {
			return true
		}
	}
	return false
}

// named are the fields n's properties name, and those of the schemas it
// applies in place when it closes them with unevaluatedProperties.
func (o *orderSchema) named(n map[string]any, depth int) []string {
	names := sortedKeys(asMap(n["properties"]))
	if _, ok := n["additionalProperties"]; ok || depth > maxSchemaDepth {
		return names
	}
	for _, sub := range o.inPlace(n) {
		if m, ok := sub.(map[string]any); ok {
			names = append(names, sortedKeys(asMap(m["properties"]))...)
			if _, ok := m["additionalProperties"]; !ok {
				names = append(names, o.named(m, depth+1)...)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// element is why n cannot produce p, whose step i is an array's element.
// A value that may be an object is not followed (.[] gives its values).
func (o *orderSchema) element(n map[string]any, types []string, p docPath, i int, wantArray bool, depth int) *refusal {
	switch {
	case types != nil && !slices.Contains(types, "array") && !slices.Contains(types, "object"):
		return &refusal{kind: notArray, at: i, types: types}
	case types == nil || slices.Contains(types, "object"):
		return nil
	}
	prefix := asList(n["prefixItems"])
	items, ok := n["items"]
	if tuple, isTuple := items.([]any); isTuple { // draft-07: items as a tuple
		prefix = tuple
		items, ok = n["additionalItems"]
	}
	switch {
	case !ok || items == true:
		return nil
	case items == false && len(prefix) == 0:
		return &refusal{kind: noElements, at: i}
	case items != false:
		prefix = append(slices.Clip(prefix), items)
	}
	return o.every(prefix, p, i+1, wantArray, depth)
}

// types are the JSON types n allows its value, with those of the schemas
// it must also meet ($ref, allOf); nil: any.
func (o *orderSchema) types(n map[string]any, depth int) []string {
	var out []string
	switch t := n["type"].(type) {
	case string:
		out = []string{t}
	case []any:
		out = []string{}
		for _, v := range t {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	if depth > maxSchemaDepth {
		return out
	}
	var musts []any
	if ref, ok := n["$ref"].(string); ok {
		if target, ok := o.resolve(ref); ok {
			musts = append(musts, target)
		}
	}
	for _, sub := range append(musts, asList(n["allOf"])...) {
		if m, ok := sub.(map[string]any); ok {
			out = intersect(out, o.types(m, depth+1))
		}
	}
	return out
}

// intersect is the types both a and b allow (nil: any).
func intersect(a, b []string) []string {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	var out []string
	for _, t := range a {
		switch {
		case slices.Contains(b, t), t == "integer" && slices.Contains(b, "number"):
			out = append(out, t)
		case t == "number" && slices.Contains(b, "integer"):
			out = append(out, "integer")
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// resolve finds the schema a $ref names within the document: "#", a JSON
// pointer ("#/$defs/customer") or an anchor ("#customer"), with or without
// the document's $id before it. A ref to another document is not followed.
func (o *orderSchema) resolve(ref string) (any, bool) {
	if o.id != "" {
		ref = strings.TrimPrefix(ref, strings.TrimSuffix(o.id, "#"))
	}
	frag, ok := strings.CutPrefix(ref, "#")
	switch {
	case !ok:
		return nil, false
	case frag == "":
		return o.root, true
	case !strings.HasPrefix(frag, "/"):
		return findAnchor(o.root, frag, 0)
	}
	node := o.root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return nil, false
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			if node, ok = n[tok]; !ok {
				return nil, false
			}
		case []any:
			k, err := strconv.Atoi(tok)
			if err != nil || k < 0 || k >= len(n) {
				return nil, false
			}
			node = n[k]
		default:
			return nil, false
		}
	}
	return node, true
}

// findAnchor finds the schema whose $anchor is name (or, before 2019-09,
// whose $id is #name).
func findAnchor(node any, name string, depth int) (any, bool) {
	if depth > maxSchemaDepth {
		return nil, false
	}
	switch n := node.(type) {
	case map[string]any:
		if n["$anchor"] == name || n["$id"] == "#"+name {
			return n, true
		}
		for _, k := range sortedKeys(n) {
			if found, ok := findAnchor(n[k], name, depth+1); ok {
				return found, true
			}
		}
	case []any:
		for _, v := range n {
			if found, ok := findAnchor(v, name, depth+1); ok {
				return found, true
			}
		}
	}
	return nil, false
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// explain says the refusal of path p, each path shown by show.
func (r *refusal) explain(p docPath, show func(docPath) string) string {
	where := show(p[:r.at])
	switch r.kind {
	case closedObject:
		allowed := "none"
		if len(r.names) > 0 {
			allowed = "only " + strings.Join(r.names, ", ")
		}
		return fmt.Sprintf("the schema allows no field %s in %s (%s)", p[r.at].Field, where, allowed)
	case notObject:
		return fmt.Sprintf("the schema makes %s %s, not an object", where, typeNames(r.types))
	case notArray:
		return fmt.Sprintf("the schema makes %s %s, not an array", where, typeNames(r.types))
	case noElements:
		return fmt.Sprintf("the schema allows no element in %s", where)
	}
	return fmt.Sprintf("the schema allows nothing at %s", where)
}

// typeNames are JSON types as words: "a string or null".
func typeNames(types []string) string {
	if len(types) == 0 {
		return "nothing"
	}
	words := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "null":
			words[i] = t
		case "object", "array", "integer":
			words[i] = "an " + t
		default:
			words[i] = "a " + t
		}
	}
	return strings.Join(words, " or ")
}
