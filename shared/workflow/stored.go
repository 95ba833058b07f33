package workflow

import (
	"encoding/json"
	"fmt"
)

// MaxDefinitionBytes bounds a workflow's definition as the state store keeps
// it (its JSON, the order schema included): one DynamoDB item, whose limit
// is 400 KB, with room for its key and attribute names. Checked wherever a
// workflow file is read (synth, cold start, sasctl workflow validate), so the
// store is never asked to keep one it cannot.
const MaxDefinitionBytes = 300 << 10

// StoredBytes is the size of d's definition as the state store keeps it.
func (d Definition) StoredBytes() (int, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return 0, fmt.Errorf("encode workflow %s: %w", d.Name, err)
	}
	return len(b), nil
}

// storedSize is the problem of a definition too large to keep, if it is.
func (d Definition) storedSize() Problems {
	n, err := d.StoredBytes()
	switch {
	case err != nil:
		return Problems{{Field: "schema", What: err.Error()}}
	case n > MaxDefinitionBytes:
		return Problems{{Field: "schema", What: fmt.Sprintf("the workflow's definition, its schema included, is %d bytes: "+
			"at most %d (the state store keeps it in one DynamoDB item); keep the schema's descriptions short, or split the workflow",
			n, MaxDefinitionBytes)}}
	}
	return nil
}
