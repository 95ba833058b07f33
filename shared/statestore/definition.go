package statestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// Definition reads back the workflow an order runs: the definition stored
// for its workflow's version when its first order was submitted, or, for an
// order stored before definitions were, what its state item holds (each
// record its action: name, agent, service action, timeout, threshold,
// backoff; the item the workflow's name, version, pickup timeout and
// deadline). An order keeps the definition it started with, whatever the
// deployment runs now: the Scheduler and the Agents read it for an order
// whose version the deployment no longer has. An order stored before the
// pickup timeout was kept has none (PickupTimeout 0).
func (s *Store) Definition(ctx context.Context, orderID string) (workflow.Definition, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return workflow.Definition{}, err
	}
	if d, ok, err := s.storedDefinition(ctx, it.Workflow, it.WfVersion); err != nil || ok {
		return d, err
	}
	return it.definition(), nil
}

// VersionDefinition reads back version of workflow name, which the order
// ran or runs: as stored when its first order was submitted or moved to it,
// or, for an order stored before definitions were, what its state item
// holds if it still runs that version. (An order moved to another version
// since a message naming this one was sent is still read by it right.)
func (s *Store) VersionDefinition(ctx context.Context, orderID, name, version string) (workflow.Definition, error) {
	if d, ok, err := s.storedDefinition(ctx, name, version); err != nil || ok {
		return d, err
	}
	it, err := s.item(ctx, orderID)
	if err != nil {
		return workflow.Definition{}, err
	}
	if version != "" && it.WfVersion != version {
		return workflow.Definition{}, fmt.Errorf("workflow %s version %s is not stored, and order %s runs %s", name, version, orderID, it.WfVersion)
	}
	return it.definition(), nil
}

// definitionKey is the state table key of a workflow version's definition
// ("#" is in no OrderID).
func definitionKey(name, version string) map[string]types.AttributeValue {
	return key("wf#"+name+"@"+version, "DEF")
}

// PutDefinition stores a workflow version's definition, once: Submit does
// before the first order of a version this process submits.
func (s *Store) PutDefinition(ctx context.Context, d workflow.Definition) error {
	o := s.definedOnce(d)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := s.putDefinition(ctx, d); err != nil {
		return err
	}
	o.done = true
	return nil
}

// putDefinition writes d unless its version's definition is stored already.
func (s *Store) putDefinition(ctx context.Context, d workflow.Definition) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode workflow %s %s: %w", d.Name, d.Version, err)
	}
	if len(b) > workflow.MaxDefinitionBytes { // a workflow file's validation refuses it first
		return fmt.Errorf("store workflow %s %s: its definition is %d bytes, at most %d", d.Name, d.Version, len(b), workflow.MaxDefinitionBytes)
	}
	item := definitionKey(d.Name, d.Version)
	item["Def"] = str(string(b))
	once, err := creates()
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.state, Item: item, ConditionExpression: &once.Condition})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("store workflow %s %s: %w", d.Name, d.Version, err)
	}
	return nil
}

// storedDefinition reads a workflow version's stored definition.
func (s *Store) storedDefinition(ctx context.Context, name, version string) (workflow.Definition, bool, error) {
	if version == "" {
		return workflow.Definition{}, false, nil
	}
	s.readMu.Lock()
	d, ok := s.read[name+"@"+version]
	s.readMu.Unlock()
	if ok {
		return d, true, nil
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.state, Key: definitionKey(name, version)})
	if err != nil {
		return workflow.Definition{}, false, fmt.Errorf("read workflow %s %s: %w", name, version, err)
	}
	v, _ := out.Item["Def"].(*types.AttributeValueMemberS)
	if v == nil {
		return workflow.Definition{}, false, nil
	}
	if err := json.Unmarshal([]byte(v.Value), &d); err != nil {
		return d, false, fmt.Errorf("decode workflow %s %s: %w", name, version, err)
	}
	if err := d.Compile(); err != nil {
		return d, true, err
	}
	s.readMu.Lock()
	if s.read == nil || len(s.read) >= maxRead {
		s.read = map[string]workflow.Definition{}
	}
	s.read[name+"@"+version] = d
	s.readMu.Unlock()
	return d, true, nil
}

func (it stateItem) definition() workflow.Definition {
	d := workflow.Definition{Name: it.Workflow, Version: it.WfVersion,
		PickupTimeout: time.Duration(it.PickupMs) * time.Millisecond, Deadline: time.Duration(it.DeadlineMs) * time.Millisecond}
	for _, st := range it.steps() {
		a := st.Action
		if !st.Undo {
			d.Steps = append(d.Steps, workflow.Step{Action: a})
			continue
		}
		if st.Index < len(d.Steps) { // steps() lists every step before any undo action
			d.Steps[st.Index].Undo = &a
		}
	}
	return d
}

// pickup is the order's workflow's pickup timeout, or def for an order
// stored before it was kept.
func (it stateItem) pickup(def time.Duration) time.Duration {
	if it.PickupMs > 0 {
		return time.Duration(it.PickupMs) * time.Millisecond
	}
	return def
}
