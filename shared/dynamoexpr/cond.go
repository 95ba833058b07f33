package dynamoexpr

import "strings"

// Plus is a + b (a number attribute and a number: SET's arithmetic).
func Plus(a, b Operand) Operand { return term{a.operand() + "+" + b.operand()} }

// Minus is a − b.
func Minus(a, b Operand) Operand { return term{a.operand() + "-" + b.operand()} }

// IfNotExists is p, or v if p does not exist (SET's if_not_exists).
func IfNotExists(p Path, v Operand) Operand {
	return term{"if_not_exists(" + p.text + "," + v.operand() + ")"}
}

// ListAppend is the list a followed by the list b (SET's list_append).
func ListAppend(a, b Operand) Operand {
	return term{"list_append(" + a.operand() + "," + b.operand() + ")"}
}

// Size is the size of p (a condition's size()).
func Size(p Path) Operand { return term{"size(" + p.text + ")"} }

// Exists is attribute_exists(p).
func Exists(p Path) Cond { return Cond{"attribute_exists(" + p.text + ")"} }

// NotExists is attribute_not_exists(p).
func NotExists(p Path) Cond { return Cond{"attribute_not_exists(" + p.text + ")"} }

// BeginsWith is begins_with(p, prefix).
func BeginsWith(p Path, prefix Operand) Cond {
	return Cond{"begins_with(" + p.text + "," + prefix.operand() + ")"}
}

// Contains is contains(p, v): the set or list p holds v (or the string p
// has v in it).
func Contains(p Path, v Operand) Cond { return Cond{"contains(" + p.text + "," + v.operand() + ")"} }

// Equal is a = b.
func Equal(a, b Operand) Cond { return Cond{a.operand() + "=" + b.operand()} }

// NotEqual is a <> b.
func NotEqual(a, b Operand) Cond { return Cond{a.operand() + "<>" + b.operand()} }

// Less is a < b.
func Less(a, b Operand) Cond { return Cond{a.operand() + "<" + b.operand()} }

// LessOrEqual is a <= b.
func LessOrEqual(a, b Operand) Cond { return Cond{a.operand() + "<=" + b.operand()} }

// Greater is a > b.
func Greater(a, b Operand) Cond { return Cond{a.operand() + ">" + b.operand()} }

// And holds when every one of conds does. (AND binds tighter than OR, Or
// parenthesises itself and Not its operand: And needs no parentheses.)
func And(conds ...Cond) Cond { return Cond{join(conds, " AND ")} }

// Or holds when any one of conds does.
func Or(conds ...Cond) Cond { return Cond{"(" + join(conds, " OR ") + ")"} }

// Not holds when c does not.
func Not(c Cond) Cond { return Cond{"NOT (" + c.text + ")"} }

func join(conds []Cond, sep string) string {
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = c.text
	}
	return strings.Join(parts, sep)
}

// Between is a BETWEEN lo AND hi (both included).
func Between(a, lo, hi Operand) Cond {
	return Cond{a.operand() + " BETWEEN " + lo.operand() + " AND " + hi.operand()}
}

// GreaterOrEqual is a >= b.
func GreaterOrEqual(a, b Operand) Cond { return Cond{a.operand() + ">=" + b.operand()} }
