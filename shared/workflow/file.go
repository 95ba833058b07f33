package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The file a team writes: a workflow, YAML or JSON (JSON is read as YAML),
// against workflow.schema.json. ParseFile turns it into a Definition or
// says every problem it has, each with its line and field.

// fileSpec is a workflow file as written.
type fileSpec struct {
	Name          string               `yaml:"name"`
	ID            string               `yaml:"id"`
	Deadline      duration             `yaml:"deadline"`
	PickupTimeout duration             `yaml:"pickupTimeout"`
	ResultLimit   byteSize             `yaml:"resultLimit"`
	Schema        schemaSpec           `yaml:"schema"`
	Defaults      limitsSpec           `yaml:"defaults"`
	Agents        map[string]agentSpec `yaml:"agents"`
	Steps         []stepSpec           `yaml:"steps"`
	Migrate       migrateSpec          `yaml:"migrate"`
	Search        []string             `yaml:"search"`
}

// migrateSpec is a file's migrate: section (Migration).
type migrateSpec struct {
	Rename  map[string]string `yaml:"rename"`
	Skip    []string          `yaml:"skip"`
	NewUndo []string          `yaml:"newUndo"`
	Keep    []string          `yaml:"keep"`
	// Transform: jq over the order's data and, by step, its results.
	Transform struct {
		Order   string            `yaml:"order"`
		Results map[string]string `yaml:"results"`
	} `yaml:"transform"`
}

// limitsSpec is what a step or an undo action may leave to the file's
// defaults.
type limitsSpec struct {
	Timeout      duration `yaml:"timeout"`
	MaxFailures  int      `yaml:"maxFailures"`
	RetryBackoff duration `yaml:"retryBackoff"`
}

// actionSpec is a step or an undo action as written.
type actionSpec struct {
	Name       string `yaml:"name"`
	Agent      string `yaml:"agent"`
	Action     string `yaml:"action"`
	Input      string `yaml:"input"` // jq over the step's document
	limitsSpec `yaml:",inline"`
}

// undoSpec is a step's undo as written: an action, or none (the step
// changes nothing that needs undoing).
type undoSpec struct {
	actionSpec
	none bool
}

// UnmarshalYAML reads `undo: none` or an action.
func (u *undoSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "none" {
		u.none = true
		return nil
	}
	return n.Decode(&u.actionSpec)
}

type stepSpec struct {
	actionSpec `yaml:",inline"`
	Needs      *[]string `yaml:"needs"`
	ForEach    string    `yaml:"forEach"`
	Async      bool      `yaml:"async"`
	Undo       *undoSpec `yaml:"undo"`
	Wait       *waitSpec `yaml:"wait"`
	Sleep      duration  `yaml:"sleep"`
	Until      string    `yaml:"until"`     // jq over the step's document: an RFC 3339 time or Unix seconds
	OnFailure  string    `yaml:"onFailure"` // undo (the default) or hold
	HoldFor    duration  `yaml:"holdFor"`   // with hold: how long, at most (default: the order's deadline)
}

type waitSpec struct {
	Event     string   `yaml:"event"`
	Timeout   duration `yaml:"timeout"`
	OnTimeout string   `yaml:"onTimeout"` // fail (the default) or continue
	Senders   []string `yaml:"senders"`   // SQS SenderIds whose event it takes
}

type agentSpec struct {
	Endpoint  string    `yaml:"endpoint"`
	Timeout   duration  `yaml:"timeout"`
	Transient []int     `yaml:"transient"`
	Refuse    []int     `yaml:"refuse"`
	Auth      *authSpec `yaml:"auth"`
	Custom    bool      `yaml:"custom"`
	// Concurrency is its function's most instances at once (0: the
	// deployment's).
	Concurrency int `yaml:"concurrency"`
	// Memory is its function's memory in MB (0: the stack's).
	Memory int `yaml:"memory"`
	// RateLimit bounds its calls across every instance: 50/s, 600/m.
	RateLimit string `yaml:"rateLimit"`
	// RateBurst lets that many calls go at once after a quiet spell.
	RateBurst int `yaml:"rateBurst"`
	// PerKey bounds its calls in flight per value of an expression.
	PerKey *perKeySpec `yaml:"perKey"`
}

type perKeySpec struct {
	Key      string `yaml:"key"`      // jq over the step's document: .order.customer
	InFlight int    `yaml:"inFlight"` // calls at once per value (default 1)
}

type authSpec struct {
	Header    string     `yaml:"header"`
	Prefix    string     `yaml:"prefix"`
	Secret    string     `yaml:"secret"`
	Parameter string     `yaml:"parameter"`
	SigV4     *sigV4Spec `yaml:"sigv4"`
}

type sigV4Spec struct {
	Service  string `yaml:"service"`
	Region   string `yaml:"region"`
	Resource string `yaml:"resource"`
}

// duration is a Go duration as written: "30s", "24h".
type duration struct {
	time.Duration
	set bool
}

// UnmarshalYAML reads a duration.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		// A TypeError lets the decoder go on and report the file's other problems.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: %q is not a duration like 30s, 5m or 24h",
			n.Line, n.Column, n.Value)}}
	}
	d.Duration, d.set = v, true
	return nil
}

// byteSize is a size as written: 4096, "4KB", "4KiB" (both 1024 bytes a
// kilobyte), "16MB" or "16MiB".
type byteSize struct {
	n   int
	set bool
}

// UnmarshalYAML reads a size.
func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	unit := 1
	for suffix, u := range map[string]int{"KiB": 1 << 10, "KB": 1 << 10, "kB": 1 << 10, "MiB": 1 << 20, "MB": 1 << 20} {
		if strings.HasSuffix(v, suffix) {
			v, unit = strings.TrimSpace(strings.TrimSuffix(v, suffix)), u
			break
		}
	}
	k, err := strconv.Atoi(v)
	if err != nil || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: %q is not a size like 4096, 4KB or 16MB",
			n.Line, n.Column, n.Value)}}
	}
	b.n, b.set = k*unit, true
	return nil
}

// Problem is one thing wrong with a workflow file, or, a Warning, one it
// may mean otherwise than it says: a warning leaves the file valid.
type Problem struct {
	File    string
	Line    int    // 0 when no line applies
	Field   string // the path of the field, as steps[1].timeout
	What    string
	Warning bool
}

func (p Problem) String() string {
	where := p.File
	if p.Line > 0 {
		where += fmt.Sprintf(":%d", p.Line)
	}
	if p.Warning {
		where += ": warning"
	}
	if p.Field != "" {
		return where + ": " + p.Field + ": " + p.What
	}
	return where + ": " + p.What
}

// Problems is every problem of a workflow file (or files).
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// split parts ps into problems and warnings, each in its order (nil if
// none).
func (ps Problems) split() (problems, warnings Problems) {
	for _, p := range ps {
		if p.Warning {
			warnings = append(warnings, p)
		} else {
			problems = append(problems, p)
		}
	}
	return problems, warnings
}

// AsProblems returns err's problems, or nil if it has none.
func AsProblems(err error) Problems {
	var ps Problems
	if errors.As(err, &ps) {
		return ps
	}
	return nil
}

// Vars fills the ${NAME}s of agent declarations (Resolve): os.Getenv, or a
// map's lookup.
type Vars func(name string) string

// Options say how to read workflow files.
type Options struct {
	// MaxStepTimeout, if set, is the longest step timeout an agent function
	// allows: its own timeout less the time it needs to reply.
	MaxStepTimeout time.Duration
	// Dir is where a schema file the workflow names is read from (default:
	// the workflow file's directory).
	Dir fs.FS
}

// LoadFile reads and parses a workflow file.
func LoadFile(path string, o Options) (Definition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Definition{}, fmt.Errorf("workflow file: %w", err)
	}
	return ParseFile(path, data, o)
}

// ParseFile parses a workflow file (YAML or JSON) named name and validates
// it. The error is Problems: every problem, each with its line and field.
// Its warnings, which leave it valid, are the definition's Warnings. The
// ${NAME}s of its agent declarations stay as written, for Resolve.
func ParseFile(name string, data []byte, o Options) (Definition, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Definition{}, Problems{{File: name, Line: yamlProblemLine(data, err), What: yamlMessage(err)}}
	}
	var spec fileSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	lines := fieldLines(&root)
	var decoded Problems
	if err := dec.Decode(&spec); err != nil && !errors.Is(err, io.EOF) { // an empty file is a spec with nothing in it
		decoded = decodeProblems(name, err, lines)
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return Definition{}, decoded
		}
		// The decoder went on past the fields it refused: check the rest too.
	}
	def, ps := spec.definition(o)
	def.File, def.lines = name, lines
	ps = append(ps, def.readSchema(name, spec.Schema, o.Dir)...)
	ps = append(ps, def.storedSize()...)
	for i := range ps {
		ps[i].File, ps[i].Line = name, lines.of(ps[i].Field)
	}
	ps = append(decoded, slices.DeleteFunc(ps, func(p Problem) bool {
		return slices.ContainsFunc(decoded, func(d Problem) bool { return d.Field == p.Field })
	})...)
	slices.SortStableFunc(ps, func(a, b Problem) int { return a.Line - b.Line })
	ps, def.Warnings = ps.split()
	if len(ps) > 0 {
		return def, ps
	}
	return def, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+):? ?`)

// yamlLine is the line a YAML error names (0 if none).
func yamlLine(err error) int {
	var n int
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		fmt.Sscan(m[1], &n)
	}
	return n
}

// yamlProblemLine is the line of data where the syntax error err is.
// yaml.v3 names the line of what it was reading when it met the problem
// (the mapping or list the bad line is in, counted from 0: a top-level
// key's problem is "line 1", or none), not the problem's own. The parser
// reads a file in order, so the problem is on the first line at which the
// file's beginning fails as the whole file does: found by bisection, about
// log2(lines) parses of a file that already failed. A beginning that never
// fails so (an error only the end of the file brings) keeps the line the
// error names.
func yamlProblemLine(data []byte, err error) int {
	what := yamlMessage(err)
	ends := []int{} // the offset after each line
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	failsSo := func(lines int) bool {
		var n yaml.Node
		e := yaml.Unmarshal(data[:ends[lines-1]], &n)
		return e != nil && yamlMessage(e) == what
	}
	// The first n with failsSo(n), if failing so holds from there on.
	n := sort.Search(len(ends), func(i int) bool { return failsSo(i + 1) }) + 1
	if n > len(ends) || !failsSo(n) {
		return yamlLine(err)
	}
	return n
}

func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return yamlLineRE.ReplaceAllString(strings.TrimPrefix(msg, "unmarshal errors:\n  "), "") // the line goes in front
}

// decodeProblems turns the decoder's errors (an unknown field, a wrong type,
// a bad duration) into Problems, one per line it lists, each with its field
// where the file says which.
func decodeProblems(name string, err error, lines lineMap) Problems {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return Problems{{File: name, Line: yamlLine(err), What: strings.TrimSpace(yamlMessage(err))}}
	}
	var ps Problems
	for _, e := range te.Errors {
		p := Problem{File: name, Line: yamlLine(fmt.Errorf("%s", e)), What: strings.TrimSpace(yamlLineRE.ReplaceAllString(e, ""))}
		if m := columnRE.FindStringSubmatch(p.What); m != nil {
			col, _ := strconv.Atoi(m[1])
			p.Field, p.What = lines.value(p.Line, col), strings.TrimPrefix(p.What, m[0])
		}
		if m := unknownFieldRE.FindStringSubmatch(p.What); m != nil {
			p.Field, p.What = lines.key(p.Line, m[1]), "unknown field "+m[1]
		}
		ps = append(ps, p)
	}
	return ps
}

var (
	unknownFieldRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
	columnRE       = regexp.MustCompile(`^column (\d+): `)
)
