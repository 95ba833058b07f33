package workflow

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

// What a jq expression of a workflow reads: the paths into its document
// (.order.customer.id, .order.items[].sku) it indexes, found on the parsed
// expression, so that validation can check them against the order's schema.
// Only what is sure is followed: a path is tracked through pipes, `as`
// bindings, alternatives, if, select, map and the like; where the input is
// not known (a user's function, a reduce's state, an index computed) nothing
// is recorded, so a path reported is one the expression reads.

// pathStep is one step of a path: a field, or any element of an array
// (Elem: .[], .[0], .[-1]).
type pathStep struct {
	Field string
	Elem  bool
}

// docPath is a path from a document's root.
type docPath []pathStep

// String writes the path as jq does: .order.items[].sku, .results["a-b"].
func (p docPath) String() string {
	if len(p) == 0 {
		return "."
	}
	var b strings.Builder
	for _, s := range p {
		switch {
		case s.Elem:
			b.WriteString("[]")
		case jqIdentRE.MatchString(s.Field):
			b.WriteString("." + s.Field)
		default:
			b.WriteString(`["` + strings.ReplaceAll(strings.ReplaceAll(s.Field, `\`, `\\`), `"`, `\"`) + `"]`)
		}
	}
	return b.String()
}

// jqIdentRE is a field name jq reads as .name.
var jqIdentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// with is the path one step further (a copy).
func (p docPath) with(s pathStep) docPath { return append(slices.Clip(p), s) }

// hasPrefix reports whether q is a proper prefix of p.
func (p docPath) hasPrefix(q docPath) bool { return len(q) < len(p) && slices.Equal(p[:len(q)], q) }

// The most paths tracked at once, and read, in one expression.
const (
	maxTracked = 32
	maxReads   = 256
)

// jqReads are the paths an expression reads.
type jqReads struct {
	reads []docPath
	seen  map[string]bool
	// alias are root fields that stand for another path (a forEach step's
	// .item for an element of the order's array).
	alias map[string]docPath
	// writing > 0 while the paths walked are written, not read (the left
	// of an assignment, del's argument): they are not recorded.
	writing int
}

// readPaths parses the jq expression src and returns the paths it reads
// from in (nil: its document's root), and where its values come from (the
// paths it outputs as they are). alias maps root fields to the path they
// stand for.
func readPaths(src string, in docPath, alias map[string]docPath) (reads, outs []docPath, err error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, nil, err
	}
	w := &jqReads{seen: map[string]bool{}, alias: alias}
	outs = w.query(q, []docPath{in}, nil)
	return w.reads, outs, nil
}

// scope is what is bound where an expression runs: variables (the paths
// their values come from) and the functions it defines.
type scope struct {
	parent *scope
	name   string    // $x, or a function's name
	paths  []docPath // a variable's
	fn     bool
}

func (s *scope) withVar(name string, paths []docPath) *scope {
	return &scope{parent: s, name: name, paths: paths}
}

func (s *scope) withFunc(name string) *scope { return &scope{parent: s, name: name, fn: true} }

// lookup is the innermost binding of name, or nil.
func (s *scope) lookup(name string) *scope {
	for ; s != nil; s = s.parent {
		if s.name == name {
			return s
		}
	}
	return nil
}

// step is each of in one step further, recording each as read.
func (w *jqReads) step(in []docPath, s pathStep) []docPath {
	out := make([]docPath, 0, len(in))
	for _, p := range in {
		next := p.with(s)
		if a, ok := w.alias[s.Field]; ok && len(p) == 0 && !s.Elem {
			next = slices.Clone(a)
		}
		w.record(next)
		if len(out) < maxTracked {
			out = append(out, next)
		}
	}
	return out
}

func (w *jqReads) record(p docPath) {
	if w.writing > 0 {
		return
	}
	k := p.String()
	if w.seen[k] || len(w.reads) >= maxReads {
		return
	}
	w.seen[k] = true
	w.reads = append(w.reads, p)
}

// query walks q run on in, returning where its outputs come from.
func (w *jqReads) query(q *gojq.Query, in []docPath, s *scope) []docPath {
	if q == nil {
		return nil
	}
	for _, fd := range q.FuncDefs {
		s = s.withFunc(fd.Name)
		body := s
		for _, a := range fd.Args {
			if strings.HasPrefix(a, "$") {
				body = body.withVar(a, nil)
			} else {
				body = body.withFunc(a)
			}
		}
		w.query(fd.Body, nil, body)
	}
	if q.Term != nil {
		return w.term(q.Term, in, s)
	}
	switch q.Op {
	case gojq.OpPipe:
		if len(q.Patterns) == 0 {
			return w.query(q.Right, w.query(q.Left, in, s), s)
		}
		src := w.query(q.Left, in, s)
		for _, p := range q.Patterns {
			s = w.bind(p, src, s)
		}
		return w.query(q.Right, in, s) // `E as $x | body`: body runs on the same input
	case gojq.OpComma, gojq.OpAlt:
		return capped(append(w.query(q.Left, in, s), w.query(q.Right, in, s)...))
	case gojq.OpAssign, gojq.OpModify, gojq.OpUpdateAdd, gojq.OpUpdateSub, gojq.OpUpdateMul, gojq.OpUpdateDiv,
		gojq.OpUpdateMod, gojq.OpUpdateAlt:
		return w.assign(q, in, s)
	default:
		w.query(q.Left, in, s)
		w.query(q.Right, in, s)
		return nil
	}
}

// assign walks an assignment: its left names paths it writes (a field it
// adds is no read), its right runs on its input, or for |= on what the
// left names. It outputs its input, changed.
func (w *jqReads) assign(q *gojq.Query, in []docPath, s *scope) []docPath {
	w.writing++
	at := w.query(q.Left, in, s)
	w.writing--
	if q.Op == gojq.OpModify {
		w.query(q.Right, at, s)
	} else {
		w.query(q.Right, in, s)
	}
	return in
}

// bind binds a pattern's variables to the parts of v they destructure.
func (w *jqReads) bind(p *gojq.Pattern, v []docPath, s *scope) *scope {
	switch {
	case p.Name != "":
		return s.withVar(p.Name, v)
	case p.Array != nil:
		for _, e := range p.Array {
			s = w.bind(e, w.step(v, pathStep{Elem: true}), s)
		}
	case p.Object != nil:
		for _, kv := range p.Object {
			s = w.bindField(kv, v, s)
		}
	}
	return s
}

// bindField binds one field of an object pattern: {$name}, {key: $v},
// {"key": $v}, {(expr): $v}.
func (w *jqReads) bindField(kv *gojq.PatternObject, v []docPath, s *scope) *scope {
	var field []docPath
	switch {
	case strings.HasPrefix(kv.Key, "$"):
		field = w.step(v, pathStep{Field: kv.Key[1:]})
		s = s.withVar(kv.Key, field)
	case kv.Key != "":
		field = w.step(v, pathStep{Field: kv.Key})
	case kv.KeyString != nil && kv.KeyString.Queries == nil:
		field = w.step(v, pathStep{Field: kv.KeyString.Str})
	}
	if kv.Val != nil {
		s = w.bind(kv.Val, field, s)
	}
	return s
}

// term walks a term run on in, then its suffixes.
func (w *jqReads) term(t *gojq.Term, in []docPath, s *scope) []docPath {
	out := w.base(t, in, s)
	for _, sfx := range t.SuffixList {
		switch {
		case sfx.Index != nil:
			out = w.index(sfx.Index, out, in, s)
		case sfx.Iter:
			out = w.step(out, pathStep{Elem: true})
		}
	}
	return out
}

// base walks a term without its suffixes.
func (w *jqReads) base(t *gojq.Term, in []docPath, s *scope) []docPath {
	switch t.Type {
	case gojq.TermTypeIdentity:
		return in
	case gojq.TermTypeIndex:
		return w.index(t.Index, in, in, s)
	case gojq.TermTypeFunc:
		return w.call(t.Func, in, s)
	case gojq.TermTypeObject:
		w.object(t.Object, in, s)
	case gojq.TermTypeArray:
		w.query(t.Array.Query, in, s)
	case gojq.TermTypeUnary:
		w.term(t.Unary.Term, in, s)
	case gojq.TermTypeFormat, gojq.TermTypeString:
		w.str(t.Str, in, s)
	case gojq.TermTypeIf:
		return w.ifThen(t.If, in, s)
	case gojq.TermTypeTry:
		out := w.query(t.Try.Body, in, s)
		w.query(t.Try.Catch, nil, s) // its input is the error
		return out
	case gojq.TermTypeReduce:
		w.loop(t.Reduce.Query, t.Reduce.Patterns, t.Reduce.Start, in, s, t.Reduce.Update)
	case gojq.TermTypeForeach:
		w.loop(t.Foreach.Query, t.Foreach.Patterns, t.Foreach.Start, in, s, t.Foreach.Update, t.Foreach.Extract)
	case gojq.TermTypeLabel:
		return w.query(t.Label.Body, in, s)
	case gojq.TermTypeQuery:
		return w.query(t.Query, in, s)
	}
	return nil
}

// index walks an index (.name, ."name", .[e], .[a:b]) applied to base;
// its own expressions run on the term's input in.
func (w *jqReads) index(ix *gojq.Index, base, in []docPath, s *scope) []docPath {
	switch {
	case ix.Name != "":
		return w.step(base, pathStep{Field: ix.Name})
	case ix.Str != nil && ix.Str.Queries == nil:
		return w.step(base, pathStep{Field: ix.Str.Str})
	case ix.Str != nil:
		w.str(ix.Str, in, s)
		return nil
	case ix.IsSlice: // a slice is of the same array
		w.query(ix.Start, in, s)
		w.query(ix.End, in, s)
		return base
	}
	if st, ok := constStep(ix.Start); ok {
		return w.step(base, st)
	}
	w.query(ix.Start, in, s)
	return nil
}

// constStep is the step a constant index is: a string a field, a number
// an element.
func constStep(q *gojq.Query) (pathStep, bool) {
	if q == nil || q.Term == nil || len(q.FuncDefs) > 0 || len(q.Term.SuffixList) > 0 {
		return pathStep{}, false
	}
	t := q.Term
	switch {
	case t.Type == gojq.TermTypeNumber:
		return pathStep{Elem: true}, true
	case t.Type == gojq.TermTypeUnary && t.Unary.Term.Type == gojq.TermTypeNumber && len(t.Unary.Term.SuffixList) == 0:
		return pathStep{Elem: true}, true
	case t.Type == gojq.TermTypeString && t.Str.Queries == nil:
		return pathStep{Field: t.Str.Str}, true
	}
	return pathStep{}, false
}

// object walks an object's keys and values, each run on in: {orderId} is
// {orderId: .orderId}.
func (w *jqReads) object(o *gojq.Object, in []docPath, s *scope) {
	for _, kv := range o.KeyVals {
		w.query(kv.KeyQuery, in, s)
		if kv.KeyString != nil {
			w.str(kv.KeyString, in, s)
		}
		switch {
		case kv.Val != nil:
			w.query(kv.Val, in, s)
		case strings.HasPrefix(kv.Key, "$") || strings.HasPrefix(kv.Key, "@"):
		case kv.Key != "":
			w.step(in, pathStep{Field: kv.Key})
		case kv.KeyString != nil && kv.KeyString.Queries == nil:
			w.step(in, pathStep{Field: kv.KeyString.Str})
		}
	}
}

// str walks a string's interpolations, each run on in.
func (w *jqReads) str(str *gojq.String, in []docPath, s *scope) {
	if str == nil {
		return
	}
	for _, q := range str.Queries {
		w.query(q, in, s)
	}
}

// ifThen walks a conditional: its output is a branch's, or its input when
// no branch is taken and there is no else.
func (w *jqReads) ifThen(c *gojq.If, in []docPath, s *scope) []docPath {
	w.query(c.Cond, in, s)
	out := w.query(c.Then, in, s)
	for _, e := range c.Elif {
		w.query(e.Cond, in, s)
		out = append(out, w.query(e.Then, in, s)...)
	}
	if c.Else == nil {
		return capped(append(out, in...))
	}
	return capped(append(out, w.query(c.Else, in, s)...))
}

// loop walks a reduce or foreach: its source runs on in and binds the
// patterns, its start on in, the rest on its state (not known).
func (w *jqReads) loop(src *gojq.Query, ps []*gojq.Pattern, start *gojq.Query, in []docPath, s *scope, rest ...*gojq.Query) {
	from := w.query(src, in, s)
	for _, p := range ps {
		s = w.bind(p, from, s)
	}
	w.query(start, in, s)
	for _, q := range rest {
		w.query(q, nil, s)
	}
}

// How a builtin's arguments run, and what it outputs.
type builtinKind int

const (
	argsOnInput   builtinKind = iota + 1 // its arguments run on its input; its output is new
	filter                               // select(f): its arguments run on its input, which it outputs
	lastArgOut                           // first(f), limit(n; f): it outputs its last argument's outputs
	perElement                           // map(f): its argument runs on each element of its input
	elementOut                           // first, last, min_by(f): it outputs an element of its input
	generatorTest                        // any(g; c): c runs on g's outputs
	substitute                           // sub(re; s): s runs on the match
	pathsOnly                            // del(f), path(f): f names paths, reads none
)

// builtins are the jq builtins whose arguments' input is known, by name and
// arity; any other function's arguments are walked with no known input.
var builtins = func() map[string]builtinKind {
	m := map[string]builtinKind{}
	for kind, names := range map[builtinKind]string{
		argsOnInput: "has/1 in/1 inside/1 contains/1 startswith/1 endswith/1 ltrimstr/1 rtrimstr/1 trimstr/1 split/1 split/2 " +
			"join/1 test/1 test/2 match/1 match/2 capture/1 capture/2 scan/1 scan/2 splits/1 splits/2 index/1 rindex/1 indices/1 " +
			"error/0 error/1 strftime/1 strptime/1 strflocaltime/1 dateadd/2 datesub/2 date/0 tostring/0 tojson/0 fromjson/0 " +
			"ascii_downcase/0 ascii_upcase/0 length/0 utf8bytelength/0 not/0 type/0 keys/0 keys_unsorted/0 add/0 add/1 any/0 all/0 " +
			"sort/0 unique/0 min/0 max/0 reverse/0 tonumber/0 todate/0 fromdate/0 todateiso8601/0 fromdateiso8601/0 mktime/0 " +
			"gmtime/0 localtime/0 now/0 floor/0 ceil/0 round/0 sqrt/0 fabs/0 abs/0 pow/2 log/0 exp/0 getpath/1 setpath/2 " +
			"delpaths/1 pick/1 to_entries/0 from_entries/0 flatten/0 flatten/1 range/1 range/2 range/3 implode/0 " +
			"explode/0 trim/0 ltrim/0 rtrim/0 isempty/1 IN/1 IN/2 ascii/0 toarray/0 empty/0 isnan/0 isinfinite/0 isnormal/0 " +
			"nth/1 tostream/0 transpose/0 combinations/0 combinations/1 halt_error/0 halt_error/1 format/1",
		filter:        "select/1 values/0 nulls/0 booleans/0 numbers/0 strings/0 arrays/0 objects/0 iterables/0 scalars/0 finites/0 normals/0 debug/0 debug/1 stderr/0",
		lastArgOut:    "first/1 last/1 limit/2 nth/2",
		perElement:    "map/1 map_values/1 sort_by/1 group_by/1 unique_by/1 any/1 all/1",
		elementOut:    "first/0 last/0 min_by/1 max_by/1",
		generatorTest: "any/2 all/2",
		substitute:    "sub/2 sub/3 gsub/2 gsub/3",
		pathsOnly:     "del/1 path/1",
	} {
		for _, n := range strings.Fields(names) {
			m[n] = kind
		}
	}
	return m
}()

// call walks a call of a function or a variable's use.
func (w *jqReads) call(f *gojq.Func, in []docPath, s *scope) []docPath {
	if strings.HasPrefix(f.Name, "$") {
		if v := s.lookup(f.Name); v != nil {
			return v.paths
		}
		return nil // $ENV, $__loc__
	}
	kind := builtins[f.Name+"/"+strconv.Itoa(len(f.Args))]
	if v := s.lookup(f.Name); v != nil && v.fn {
		kind = 0 // the expression's own function: its input is not known
	}
	return w.builtin(kind, f.Args, in, s)
}

// builtin walks a builtin's arguments as kind says and returns its outputs.
func (w *jqReads) builtin(kind builtinKind, args []*gojq.Query, in []docPath, s *scope) []docPath {
	var out []docPath
	switch kind {
	case argsOnInput, filter, lastArgOut:
		for _, a := range args {
			out = w.query(a, in, s)
		}
		switch kind {
		case filter:
			return in
		case lastArgOut:
			return out
		}
		return nil
	case perElement, elementOut:
		elems := w.step(in, pathStep{Elem: true})
		for _, a := range args {
			w.query(a, elems, s)
		}
		if kind == elementOut {
			return elems
		}
		return nil
	case pathsOnly:
		w.writing++
		w.query(args[0], in, s)
		w.writing--
		return nil
	case generatorTest:
		w.query(args[1], w.query(args[0], in, s), s)
		return nil
	case substitute:
		for i, a := range args {
			if i == 1 { // the replacement runs on the match's captures
				w.query(a, nil, s)
			} else {
				w.query(a, in, s)
			}
		}
		return nil
	}
	for _, a := range args {
		w.query(a, nil, s)
	}
	return nil
}

// capped is at most maxTracked paths.
func capped(ps []docPath) []docPath {
	if len(ps) > maxTracked {
		return ps[:maxTracked]
	}
	return ps
}
