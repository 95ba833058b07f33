package statestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Move is an operator's move of one order to another version of its
// workflow (sasctl migrate).
type Move struct {
	OrderID string
	To      workflow.Definition // the version moved to, with its plan (To.Migrate)
	By      string              // who moves it, for its history
	DryRun  bool                // decide only: write nothing
	Pickup  time.Duration       // a ready record's pickup deadline, for an order stored before it was kept
	Now     time.Time
	// Kept opens the order's data and its results, and keeps them again
	// rewritten, for a plan that rewrites them or a version whose steps
	// run per item (nil: the order's data is not read, and such a move is
	// refused).
	Kept *kept.Boundary
}

// Moved is what a move did, or, dry, would do.
type Moved struct {
	Workflow string
	// From is the version the order ran; To the one it runs after (a
	// version of its own when it keeps an undo of the version that ran a
	// step: Base, then, is the version moved to).
	From, To, Base string
	// Already: the order runs the version moved to already; nothing was
	// written.
	Already bool
	// Move is where each record stands after (workflow.Moving.Move); its
	// Ready are the records whose requests are to be sent (none for a held
	// order).
	Move workflow.Moved
	// Kinds are what each record of Move.Ready does, for its request.
	Kinds map[workflow.Ref]workflow.Kind
	// Results is how many results changed key with their records, or
	// were rewritten by the plan; Rewritten says the order's data was.
	Results   int
	Rewritten bool
}

// maxMovedResults bounds the results a move carries to their records' new
// keys: with the state item, one transaction's 100 items.
const maxMovedResults = 99

// maxMoves bounds the moves an order's history keeps.
const maxMoves = 16

// Migrate moves an order to version m.To of its workflow, if the rules let
// it now (workflow.Moving.Move: a *workflow.NotMovableError says why not),
// in one conditional write of its state item, conditional on the order as
// read (with its results that change key, one transaction): a write of the
// order since is read again and decided again, up to resubmitTries times.
// The definition it runs from then on is stored first. Each record of the
// new version is its record of the earlier one, carried with its state, or
// new; the order's history says when, from which version to which, by whom.
func (s *Store) Migrate(ctx context.Context, m Move) (Moved, error) {
	for range resubmitTries {
		out, err := s.migrate(ctx, m)
		if !errors.Is(err, ErrStale) {
			return out, err
		}
	}
	return Moved{}, &workflow.NotMovableError{Reasons: []string{fmt.Sprintf("it changed each of the %d times it was read to be moved; try again", resubmitTries)}}
}

func (s *Store) migrate(ctx context.Context, m Move) (Moved, error) {
	it, err := s.item(ctx, m.OrderID)
	if err != nil {
		return Moved{}, err
	}
	out := Moved{Workflow: it.Workflow, From: it.WfVersion}
	if it.Workflow != m.To.Name {
		return out, &workflow.NotMovableError{Reasons: []string{fmt.Sprintf("it runs workflow %q, not %q", it.Workflow, m.To.Name)}}
	}
	from, err := s.VersionDefinition(ctx, m.OrderID, it.Workflow, it.WfVersion)
	if err != nil {
		return out, err
	}
	if it.WfVersion == m.To.Version || (from.Base != "" && from.Base == m.To.Version) {
		out.To, out.Base, out.Already = it.WfVersion, from.Base, true
		return out, nil
	}
	d, err := s.moveData(ctx, m, from)
	if err != nil {
		return out, err
	}
	moving := workflow.Moving{From: from, To: m.To, Data: d.data, Sealed: d.order.Sealed()}
	moved, err := moving.Move(it.order())
	if err != nil {
		return out, err
	}
	def := moved.Definition
	if def.Version == it.WfVersion && moved.Data == nil {
		// What it would run is what it runs (a version whose one change is
		// an undo the order keeps the earlier one of): nothing to write, and
		// its requests in flight stay its own.
		out.To, out.Base, out.Already = it.WfVersion, from.Base, true
		return out, nil
	}
	out.Move, out.To, out.Base = moved, def.Version, def.Base
	out.Kinds = map[workflow.Ref]workflow.Kind{}
	for _, r := range moved.Ready {
		out.Kinds[r] = def.Steps[r.Index].Kind()
	}
	next := it.moved(moved, m, it.pickup(m.Pickup))
	next.DueShard, next.DueAt = it.DueShard, it.DueAt
	if next.DueShard != "" {
		if due := next.nextDue(); due != 0 {
			next.DueAt = due
		}
	}
	results, err := s.movedResults(ctx, it, from, moved, resultRewriter{m: m, moving: moving, order: d.order})
	if err != nil {
		return out, err
	}
	out.Results, out.Rewritten = len(results), moved.Data != nil
	order, err := s.movedOrder(ctx, m, d, moved.Data)
	if err != nil {
		return out, err
	}
	if results = append(results, order...); len(results) > maxMovedResults {
		return out, &workflow.NotMovableError{Reasons: []string{fmt.Sprintf("%d results would change key with their records, "+
			"more than one write carries (%d)", len(results), maxMovedResults)}}
	}
	if m.DryRun {
		return out, nil
	}
	if err := s.definitionOnce(ctx, def); err != nil { // once a process, as Submit stores it
		return out, err
	}
	return out, s.replaceWith(ctx, next, it.Version, results)
}

// moved is the order of it as move mv leaves it: its records placed in the
// version moved to, the order's settings from it, its history told.
func (it stateItem) moved(mv workflow.Moved, m Move, pickup time.Duration) stateItem {
	def, now := mv.Definition, ms(m.Now)
	next := it
	next.Recs = make(map[string]recItem, len(mv.Recs))
	renamed := map[string]string{} // an earlier record's key → its key now
	for ref, p := range mv.Recs {
		r := recordOf(def, ref, it.Round)
		switch {
		case p.Carried:
			carried := it.Recs[sortKey(p.From)]
			carried.Name, carried.Agent, carried.Do, carried.TimeoutMs = r.Name, r.Agent, r.Do, r.TimeoutMs
			carried.MaxFailures, carried.BackoffMs, carried.HasUndo, carried.NoUndo = r.MaxFailures, r.BackoffMs, r.HasUndo, r.NoUndo
			carried.HoldMs, carried.Kind, carried.Event, carried.Continue, carried.Async = r.HoldMs, r.Kind, r.Event, r.Continue, r.Async
			carried.Starts = r.Starts
			r = carried
			renamed[sortKey(p.From)] = sortKey(ref)
		case p.Skipped:
			r.State, r.DoneAt, r.HasUndo, r.NoUndo = string(workflow.Processed), now, false, true
			r.Incidents = []string{incident(m.Now, "skipped: the order was past it when it moved to version %s", def.Version)}
		case p.Ready:
			r.DueAt, r.ReadyAt = ms(m.Now.Add(pickup)), now
		}
		// Attempt numbers never go back, at a key or for a record: a late
		// outcome of an earlier attempt stays fenced off, even on an order
		// moved back to the version it came from.
		r.Attempt = max(r.Attempt, it.Recs[sortKey(ref)].Attempt, it.Gone[sortKey(ref)])
		if !p.New {
			r.Attempt = max(r.Attempt, it.Recs[sortKey(p.From)].Attempt)
		}
		next.Recs[sortKey(ref)] = r
	}
	next.Gone, next.ItemsDone = it.gone(next), next.itemsDone(it.Round)
	next.Unalerted = nil
	for _, sk := range it.Unalerted {
		if to, ok := renamed[sk]; ok {
			next.Unalerted = append(next.Unalerted, to)
		}
	}
	if next.Events == nil && waits(def) {
		next.Events = map[string]string{} // where the round's events are kept (a nested SET needs its map)
	}
	next.WfVersion, next.PickupMs, next.DeadlineMs = def.Version, def.PickupTimeout.Milliseconds(), def.Deadline.Milliseconds()
	next.LifetimeMs = max(it.lifetime(), def.Lifetime()).Milliseconds()
	rewritten := ""
	if mv.Data != nil {
		rewritten = ", its data rewritten"
	}
	next.Moves = append(next.Moves, incident(m.Now, "moved from version %s to %s by %s%s", it.WfVersion, def.Version, m.By, rewritten))
	if len(next.Moves) > maxMoves {
		next.Moves = next.Moves[len(next.Moves)-maxMoves:]
	}
	next.Version, next.UpdatedAt = it.Version+1, now
	return next
}

// gone are the latest attempts of the records of it that next leaves
// behind (or holds with fewer), by key: a record a later move places there
// counts on from them.
func (it stateItem) gone(next stateItem) map[string]int {
	var out map[string]int
	note := func(sk string, k int) {
		if k > next.Recs[sk].Attempt {
			if out == nil {
				out = map[string]int{}
			}
			out[sk] = max(out[sk], k)
		}
	}
	for sk, r := range it.Recs {
		note(sk, max(r.Attempt, it.Gone[sk]))
	}
	for sk, k := range it.Gone {
		note(sk, k)
	}
	return out
}

// itemsDone is each forEach step's count of items done in round, from its
// records where they are (every such step has its count, 0 or more: the
// completion of an item adds to it).
func (it stateItem) itemsDone(round int) map[string]int {
	var out map[string]int
	for sk, r := range it.Recs {
		ref := refOf(sk)
		if ref.Item == 0 || ref.Undo {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		k := strconv.Itoa(ref.Index)
		if r.State == string(workflow.Processed) && r.Round == round {
			out[k]++
		} else {
			out[k] += 0
		}
	}
	return out
}

// recordOf is a new record ref of an order of def in round: Pending, with
// the action it runs.
func recordOf(def workflow.Definition, ref workflow.Ref, round int) recItem {
	st := def.Steps[ref.Index]
	a := st.Action
	if ref.Undo {
		a = *st.Undo
	}
	r := recItem{Round: max(round, 1), Name: a.Name, Agent: a.Agent, Do: a.Do, TimeoutMs: a.Timeout.Milliseconds(),
		MaxFailures: a.MaxFailures, BackoffMs: a.RetryBackoff.Milliseconds(), State: string(workflow.Pending)}
	if ref.Undo {
		return r
	}
	r.HasUndo, r.NoUndo, r.Kind, r.Async, r.HoldMs = st.Undo != nil, st.NoUndo, string(st.Kind()), st.Async, st.HoldFor.Milliseconds()
	if st.Wait != nil {
		r.Continue, r.Event = st.Wait.Continue, st.Wait.Event
	}
	r.Starts = len(def.Needs(ref.Index)) == 0 && st.Kept == "" // a kept step never runs again, in no round
	return r
}

// movedResults are the writes that carry the order's results to their
// records' keys after move mv, each under its record's name now (a later
// step's document names it so): a result under a key no record carried
// from it takes now is deleted (its record's is put there, or none is),
// but for the data of an event kept for a wait the order has not reached
// (from, the version it ran, says which), which goes with its wait.
func (s *Store) movedResults(ctx context.Context, it stateItem, from workflow.Definition, mv workflow.Moved,
	rw resultRewriter) ([]types.TransactWriteItem, error) {
	def := mv.Definition
	dest := map[string][]workflow.Ref{} // an earlier key → the records now carrying its result
	for ref, p := range mv.Recs {
		if p.Carried {
			dest[sortKey(p.From)] = append(dest[sortKey(p.From)], ref)
		}
	}
	kept := map[string]string{} // an earlier key → the eventId of the event kept as its result
	for event, eventID := range it.Events {
		i, waited := from.WaitFor(event)
		j, waits := def.WaitFor(event)
		if waited && waits && !mv.Recs[workflow.Ref{Index: j}].Carried && len(dest[sortKey(workflow.Ref{Index: i})]) == 0 {
			dest[sortKey(workflow.Ref{Index: i})] = []workflow.Ref{{Index: j}}
			kept[sortKey(workflow.Ref{Index: i})] = eventID
		}
	}
	b := x.New()
	q, err := condition(b, x.Equal(b.Plain(topology.KeyOrderID), b.String(it.OrderID)),
		x.BeginsWith(b.Plain(topology.KeySort), b.String(resultPrefix)))
	if err != nil {
		return nil, err
	}
	stored := map[string]map[string]types.AttributeValue{}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{TableName: &s.state, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: &q.Condition, ExpressionAttributeValues: q.Values})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the results of %s: %w", it.OrderID, err)
		}
		for _, item := range page.Items {
			if sk, ok := item[topology.KeySort].(*types.AttributeValueMemberS); ok {
				stored[strings.TrimPrefix(sk.Value, resultPrefix)] = item
			}
		}
	}
	put := map[string]map[string]types.AttributeValue{} // a key now → the result it takes
	stays := map[string]bool{}                          // an earlier key a result stays under, as it is
	for old, item := range stored {
		if id, ok := kept[old]; ok && stringOf(item["eid"]) != id {
			continue // not the kept event's data (an earlier one's, refused)
		}
		for _, to := range dest[old] {
			name := actionOf(def, to).Name
			from := it.Recs[old]
			rewrite := rw.rewrites(def, to) && from.State == string(workflow.Processed) && from.Round == numberOf(item["Rd"])
			if sortKey(to) == old && stringOf(item["n"]) == name && !rewrite {
				stays[old] = true
				continue
			}
			moved := maps.Clone(item)
			if rewrite {
				var err error
				if moved, err = rw.rewrite(ctx, def, to, workflow.RecordName(name, to), moved); err != nil {
					return nil, err
				}
			}
			moved[topology.KeySort], moved["n"] = str(resultPrefix+sortKey(to)), str(name)
			put[sortKey(to)] = moved
		}
	}
	var out []types.TransactWriteItem
	for _, to := range slices.Sorted(maps.Keys(put)) {
		out = append(out, types.TransactWriteItem{Put: &types.Put{TableName: &s.state, Item: put[to]}})
	}
	for _, old := range slices.Sorted(maps.Keys(stored)) {
		if _, taken := put[old]; !taken && !stays[old] {
			out = append(out, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.state, Key: key(it.OrderID, resultPrefix+old)}})
		}
	}
	return out, nil
}

// actionOf is the action record ref runs in def: its step's, or its undo.
func actionOf(def workflow.Definition, ref workflow.Ref) workflow.Action {
	st := def.Steps[ref.Index]
	if ref.Undo && st.Undo != nil {
		return *st.Undo
	}
	return st.Action
}

// stringOf is a string attribute's value ("": none, or not a string).
func stringOf(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// replaceWith writes the whole state item it, on the condition that it is
// still at Version read, with results in the same transaction; ErrStale if
// it changed.
func (s *Store) replaceWith(ctx context.Context, it stateItem, read int, results []types.TransactWriteItem) error {
	if len(results) == 0 {
		return s.replace(ctx, it, read)
	}
	put, id, err := s.putAsRead(it, read)
	if err != nil {
		return err
	}
	items := append([]types.TransactWriteItem{{Put: &put}}, results...)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(id)})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		if ownWrite(tce.CancellationReasons[0].Item, id) {
			return nil // an earlier try of this write was applied, its answer lost
		}
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("move %s: %w", it.OrderID, err)
	}
	return nil
}

// moves reads an order's history of moves.
func (it stateItem) moves() []Event {
	out := make([]Event, len(it.Moves))
	for i, line := range it.Moves {
		out[i] = parseIncident(line)
	}
	return out
}
