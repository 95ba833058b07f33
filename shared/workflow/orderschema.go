package workflow

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// An order's data may be declared by the workflow file, as a JSON Schema
// (schema: inline, or the name of a file beside the workflow file, JSON or
// YAML), which Submission checks each order against before it stores it: a
// refusal names the field at fault.

// schemaSpec is the file's schema: as written, inline or a file's name.
type schemaSpec struct {
	node *yaml.Node
}

// UnmarshalYAML keeps the node, read once the file's name is known.
func (s *schemaSpec) UnmarshalYAML(n *yaml.Node) error {
	s.node = n
	return nil
}

// readSchema reads the file's schema: its JSON, and the name of the file it
// is in ("": inline). file is the workflow file's name; dir, if set, where
// a schema file is read from.
func readSchema(file string, s schemaSpec, dir fs.FS) (doc json.RawMessage, from string, err error) {
	n := s.node
	if n == nil {
		return nil, "", nil
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		if err := n.Decode(&v); err != nil {
			return nil, "", fmt.Errorf("not a JSON Schema: %w", err)
		}
	case yaml.ScalarNode:
		from = n.Value
		if from == "" || strings.ContainsAny(from, `/\`) || from == "." || from == ".." {
			return nil, "", fmt.Errorf("%q: name a file beside the workflow file (no directory), or give the schema inline", from)
		}
		if dir == nil {
			dir = os.DirFS(filepath.Dir(file))
		}
		b, err := fs.ReadFile(dir, from)
		if err != nil {
			return nil, from, fmt.Errorf("schema file: %w", err)
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, from, fmt.Errorf("schema file %s: %w", from, err)
		}
	default:
		return nil, "", errors.New("a JSON Schema (a mapping), or the name of a file beside the workflow file")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, from, fmt.Errorf("not a JSON Schema: %w", err)
	}
	return b, from, nil
}

// readSchema reads and compiles the file's schema into d, and checks the
// paths into the order its expressions read against it (checkOrderReads);
// the version covers it.
func (d *Definition) readSchema(file string, s schemaSpec, dir fs.FS) Problems {
	doc, from, err := readSchema(file, s, dir)
	if err == nil && doc != nil {
		d.schema, err = compileSchema(doc, schemaName(file, from))
	}
	if err != nil {
		return Problems{{Field: "schema", What: err.Error()}}
	}
	if doc != nil {
		d.Schema, d.SchemaFile = doc, from
		d.Version = d.version()
	}
	return d.checkOrderReads(doc)
}

// schemaURL is the name the schema compiler knows a workflow's schema by:
// not a file (a relative name would be resolved to a file:// URL in the
// working directory, one that does not exist), and replaced in a compile
// error by the name the reader knows the schema by (schemaErr).
const schemaURL = schemaBase + "schema.json"

// schemaBase is where a relative "$ref" of the schema is resolved: nowhere
// real (noLoader loads nothing).
const schemaBase = "sas-workflow:///"

// schemaRefRE is the schema's URL, and a JSON pointer into it, as the
// compiler's errors quote it.
var schemaRefRE = regexp.MustCompile(`"` + regexp.QuoteMeta(schemaURL) + `#([^"]*)"`)

// compileSchema compiles a JSON Schema document; a compile error names it
// as name says (the workflow file's schema field, or the schema's file),
// and a "$ref" may point only within it.
func compileSchema(doc json.RawMessage, name string) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(doc)))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, schemaErr(err, name)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %w", schemaErr(err, name))
	}
	return sch, nil
}

// schemaErr is the compiler's error with the schema named as name, and a
// place in it as a JSON pointer.
func schemaErr(err error, name string) error {
	msg := strings.TrimPrefix(err.Error(), "jsonschema: ")
	msg = schemaRefRE.ReplaceAllStringFunc(msg, func(m string) string {
		if ptr := schemaRefRE.FindStringSubmatch(m)[1]; ptr != "" {
			return fmt.Sprintf("%s at %s", name, ptr)
		}
		return name
	})
	return errors.New(strings.ReplaceAll(msg, schemaBase, ""))
}

// noLoader loads no schema: a workflow's schema is all in one document (a
// "$ref" to another file or URL is refused, never read from the machine it
// runs on or the network).
type noLoader struct{}

// Load refuses url.
func (noLoader) Load(string) (any, error) {
	return nil, errors.New("a $ref points within the schema (#/$defs/...): no other file or URL is read")
}

// schemaName is how an error names the workflow's schema: the workflow
// file's schema field (inline), or the schema's file.
func schemaName(file, from string) string {
	if from != "" {
		return "schema file " + from
	}
	return file + "'s field schema"
}

// CheckOrder checks an order (its JSON, every member) against the
// workflow's schema, if it has one: the error names each field at fault
// (up to maxFaults) and what is wrong with it.
func (d Definition) CheckOrder(order json.RawMessage) error {
	if len(d.Schema) == 0 {
		return nil
	}
	sch := d.schema
	if sch == nil { // a definition read back from a store
		var err error
		if sch, err = compileSchema(d.Schema, schemaName(d.File, d.SchemaFile)); err != nil {
			return fmt.Errorf("workflow %s's schema: %w", d.Name, err)
		}
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(order)))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	err = sch.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var faults, unquoted []string
	all := leaves(ve)
	// In the order of the fields at fault: the schema's library finds them
	// in no fixed order (its properties are a map), and a refusal, its
	// DLQ reason and its metric line say the same each time.
	slices.SortStableFunc(all, func(a, b *jsonschema.ValidationError) int {
		return cmp.Or(strings.Compare(FieldPath(a.InstanceLocation), FieldPath(b.InstanceLocation)),
			slices.Compare(a.ErrorKind.KeywordPath(), b.ErrorKind.KeywordPath()))
	})
	for _, leaf := range all {
		field := "the order"
		if len(leaf.InstanceLocation) > 0 {
			field = FieldPath(leaf.InstanceLocation)
		}
		if f := field + ": " + leaf.ErrorKind.LocalizedString(english); !slices.Contains(faults, f) {
			faults = append(faults, f)
			unquoted = append(unquoted, field+": "+strings.Join(leaf.ErrorKind.KeywordPath(), "/"))
		}
	}
	return &Refusal{Err: errors.New(listFaults(faults, d.Name)), Unquoted: listFaults(unquoted, d.Name)}
}

// listFaults says an order's faults against workflow's schema, the first
// maxFaults of them (a message may quote a value of the order, its keyword
// none).
func listFaults(faults []string, workflow string) string {
	if len(faults) > maxFaults {
		faults = append(faults[:maxFaults:maxFaults], fmt.Sprintf("and %d more", len(faults)-maxFaults))
	}
	return fmt.Sprintf("%s (workflow %s's schema)", strings.Join(faults, "; "), workflow)
}

// maxFaults is how many of an order's faults a refusal names: the rest are
// counted.
const maxFaults = 5

// leaves are the faults of a validation error that have no causes of
// their own, depth first: what is wrong, field by field.
func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// english prints the schema library's messages.
var english = message.NewPrinter(language.English)

// FieldPath writes a JSON pointer's tokens as the field path the product's
// refusals name: ["items","0","sku"] is items[0].sku.
func FieldPath(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if t != "" && strings.Trim(t, "0123456789") == "" && b.Len() > 0 {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}
