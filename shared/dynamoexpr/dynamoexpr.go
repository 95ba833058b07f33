// Package dynamoexpr builds DynamoDB update, condition and key-condition
// expressions from typed parts: no caller writes clause text. A name is
// aliased (#0, #1…) unless its caller asks for it plain; a value gets a
// placeholder (:0, :1…), one for every use of the same string or number,
// so that a write that sets many fields to one value stays short; only the
// placeholders its expressions use are sent. Its size is known before it is
// sent: an expression over DynamoDB's limit (MaxBytes) is ErrTooLarge, and
// its caller may write the change in another form (Len says how much room
// the clauses so far take). It does no I/O.
package dynamoexpr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxBytes is DynamoDB's limit on any one expression string (an update's,
// a condition's): 4 KB.
const MaxBytes = 4096

// ErrTooLarge means an expression would pass MaxBytes. It is never sent.
var ErrTooLarge = errors.New("expression too large for DynamoDB")

// Operand is a value in an expression: a Path, a value's placeholder, or
// what a function (Plus, IfNotExists, ListAppend, Size) makes of them.
type Operand interface{ operand() string }

// Path is an attribute, or a part of one (a map's key, a field): an
// Operand that can be set, removed and tested.
type Path struct{ text string }

func (p Path) operand() string { return p.text }

// term is an Operand that is not a Path.
type term struct{ text string }

func (t term) operand() string { return t.text }

// Cond is a condition: a comparison, a function (Exists, NotExists,
// BeginsWith), or And, Or and Not of conditions.
type Cond struct{ text string }

// Expr is a built write's expressions and the placeholders they use.
type Expr struct {
	// Update is the update expression ("": none); Condition the condition
	// (or key condition) expression ("": none).
	Update, Condition string
	// Names and Values are the placeholders the expressions use (nil:
	// none).
	Names  map[string]string
	Values map[string]types.AttributeValue
}

// Builder is one write's expressions being built. Its zero value is not
// usable: New makes one.
type Builder struct {
	set, remove, add, del, cond []string
	names                       map[string]string // alias → name
	aliases                     map[string]string // name → alias
	values                      map[string]types.AttributeValue
	shared                      map[string]string // a string's or number's text → its placeholder
}

// New is an empty builder.
func New() *Builder {
	return &Builder{names: map[string]string{}, aliases: map[string]string{}, values: map[string]types.AttributeValue{},
		shared: map[string]string{}}
}

// Name is a top-level attribute, aliased: any name, a reserved word
// included.
func (b *Builder) Name(name string) Path { return Path{b.alias(name)} }

// Plain is a top-level attribute written as it is, the shortest form: for
// a name of letters, digits and underscores, starting with a letter, that
// DynamoDB does not reserve (it refuses a reserved word). A name of other
// characters is aliased.
func (b *Builder) Plain(name string) Path {
	if !plain(name) {
		return b.Name(name)
	}
	return Path{name}
}

// Key is p's map key (or field) name, aliased: any name.
func (b *Builder) Key(p Path, name string) Path { return Path{p.text + "." + b.alias(name)} }

// Field is p's field name written as it is (as Plain; a name of other
// characters is aliased).
func (b *Builder) Field(p Path, name string) Path {
	if !plain(name) {
		return b.Key(p, name)
	}
	return Path{p.text + "." + name}
}

func plain(name string) bool {
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return name != ""
}

// alias is name's placeholder, one for every use of it.
func (b *Builder) alias(name string) string {
	if a, ok := b.aliases[name]; ok {
		return a
	}
	a := "#" + strconv.FormatInt(int64(len(b.names)), 36)
	b.names[a], b.aliases[name] = name, a
	return a
}

// Value is v's placeholder: one for every use of the same string or
// number, its own for any other kind.
func (b *Builder) Value(v types.AttributeValue) Operand {
	var text string
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		text = "S" + x.Value
	case *types.AttributeValueMemberN:
		text = "N" + x.Value
	case *types.AttributeValueMemberBOOL:
		text = "B" + strconv.FormatBool(x.Value)
	}
	if p, ok := b.shared[text]; ok && text != "" {
		return term{p}
	}
	p := ":" + strconv.FormatInt(int64(len(b.values)), 36)
	b.values[p] = v
	if text != "" {
		b.shared[text] = p
	}
	return term{p}
}

// Int is the number n's placeholder.
func (b *Builder) Int(n int64) Operand {
	return b.Value(&types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)})
}

// String is the string s's placeholder.
func (b *Builder) String(s string) Operand { return b.Value(&types.AttributeValueMemberS{Value: s}) }

// Bool is the boolean v's placeholder.
func (b *Builder) Bool(v bool) Operand { return b.Value(&types.AttributeValueMemberBOOL{Value: v}) }

// Set sets p to v.
func (b *Builder) Set(p Path, v Operand) { b.set = append(b.set, p.text+"="+v.operand()) }

// Remove removes p.
func (b *Builder) Remove(p Path) { b.remove = append(b.remove, p.text) }

// Add adds v to the number or set p (ADD).
func (b *Builder) Add(p Path, v Operand) { b.add = append(b.add, p.text+" "+v.operand()) }

// Delete takes the elements of the set v out of the set p (DELETE).
func (b *Builder) Delete(p Path, v Operand) { b.del = append(b.del, p.text+" "+v.operand()) }

// If makes the write conditional on every one of conds too (AND).
func (b *Builder) If(conds ...Cond) {
	for _, c := range conds {
		b.cond = append(b.cond, c.text)
	}
}

// Len is how many bytes the update and the condition take so far.
func (b *Builder) Len() (update, condition int) {
	return len(b.update()), len(b.condition())
}

func (b *Builder) update() string {
	var s strings.Builder
	for _, c := range []struct {
		verb  string
		parts []string
	}{{"SET", b.set}, {"REMOVE", b.remove}, {"ADD", b.add}, {"DELETE", b.del}} {
		if len(c.parts) == 0 {
			continue
		}
		if s.Len() > 0 {
			s.WriteByte(' ')
		}
		s.WriteString(c.verb)
		s.WriteByte(' ')
		s.WriteString(strings.Join(c.parts, ","))
	}
	return s.String()
}

func (b *Builder) condition() string { return strings.Join(b.cond, " AND ") }

// Build is the expressions and the placeholders they use; ErrTooLarge if
// either is over MaxBytes.
func (b *Builder) Build() (Expr, error) {
	e := Expr{Update: b.update(), Condition: b.condition()}
	if len(e.Update) > MaxBytes || len(e.Condition) > MaxBytes {
		return Expr{}, fmt.Errorf("update %d bytes, condition %d (at most %d each): %w", len(e.Update), len(e.Condition),
			MaxBytes, ErrTooLarge)
	}
	for _, p := range placeholders(e.Update + " " + e.Condition) {
		if name, ok := b.names[p]; ok {
			if e.Names == nil {
				e.Names = map[string]string{}
			}
			e.Names[p] = name
		}
		if v, ok := b.values[p]; ok {
			if e.Values == nil {
				e.Values = map[string]types.AttributeValue{}
			}
			e.Values[p] = v
		}
	}
	return e, nil
}

// placeholders are the names' and values' placeholders in x.
func placeholders(x string) []string {
	var out []string
	for i := 0; i < len(x); i++ {
		if x[i] != '#' && x[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(x) && (x[j] >= '0' && x[j] <= '9' || x[j] >= 'a' && x[j] <= 'z') {
			j++
		}
		out = append(out, x[i:j])
		i = j - 1
	}
	return out
}

// UpdateInput is b as an UpdateItem of the item at key in table.
func (b *Builder) UpdateInput(table string, key map[string]types.AttributeValue) (*dynamodb.UpdateItemInput, error) {
	e, err := b.Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.UpdateItemInput{TableName: &table, Key: key, UpdateExpression: &e.Update,
		ExpressionAttributeNames: e.Names, ExpressionAttributeValues: e.Values}
	if e.Condition != "" {
		in.ConditionExpression = &e.Condition
	}
	return in, nil
}
