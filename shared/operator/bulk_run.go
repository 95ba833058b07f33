package operator

import (
	"context"
	"fmt"
)

// Bulk runs act on every order sel lists, one at a time, for opts.By, and
// tells each outcome to each (nil: none). It lists them all first (so that
// each order's history can say how many the action took: BulkBy), judges
// them as read (Action.Fits: one batch read a hundred), then acts on those
// that fit, at most opts.Rate a second; a dry run writes nothing. An order
// the action does not take is no error: it is refused with the reason, or,
// if it fitted when listed and not at its turn (or, opts.FromDryRun, when
// its dry run listed it), changed since listed. When
// ctx ends, it stops after the order at hand (which it finishes, whatever
// ctx says) and reports what it did, Stopped; every action refuses, or
// finds done, an order it acted on already, so the same run again goes
// on where it stopped. An error (not a refusal) stops it too, returned
// with the report so far.
func (o *Operator) Bulk(ctx context.Context, sel Selector, act Action, opts BulkOptions, each func(BulkResult)) (BulkReport, error) {
	rep := BulkReport{Action: act.Name, DryRun: opts.DryRun, Why: map[string]int{}, Orders: []BulkResult{}}
	ids, err := listAll(ctx, sel)
	if err != nil {
		return rep, err
	}
	rep.Listed = len(ids)
	rep.By = BulkBy(opts.By, act.Name, o.Now(), len(ids))
	judged, err := o.judge(ctx, act, ids)
	if err != nil {
		return rep, err
	}
	if opts.Listed != nil {
		opts.Listed(len(ids), rep.By)
	}
	wait, sleep := pace(opts.Rate), opts.sleeper()
	paceNext := false // the order before was acted on: wait before the next
	for i, id := range ids {
		if opts.Limit > 0 && rep.Done >= opts.Limit {
			rep.Left = len(ids) - i
			break
		}
		stopped := ctx.Err() != nil
		if why, listed := judged[id]; !stopped && paceNext && wait > 0 && (!listed || why == "") {
			stopped = sleep(ctx, wait) != nil // stopped while it waited
		}
		if stopped {
			rep.Stopped, rep.Left = true, len(ids)-i
			break
		}
		r, err := o.bulkOne(ctx, act, id, rep.By, opts, judged)
		if err != nil {
			return rep, fmt.Errorf("%s %s: %w", act.Name, id, err)
		}
		rep.add(r)
		paceNext = r.Outcome == BulkDone
		if each != nil {
			each(r)
		}
	}
	return rep, nil
}

// bulkOne runs act on one order, judged (Fits) when listed.
func (o *Operator) bulkOne(ctx context.Context, act Action, id, by string, opts BulkOptions, judged map[string]string) (BulkResult, error) {
	r := BulkResult{OrderID: id}
	dry := opts.DryRun
	if why := judged[id]; why != "" {
		r.Outcome, r.Why = BulkRefused, why
		if opts.FromDryRun { // the dry run took it: it changed since
			r.Outcome = BulkChanged
		}
		return r, nil
	}
	if dry && act.Fits != nil {
		r.Outcome = BulkWould
		return r, nil
	}
	// The order at hand is finished whatever ctx says: a stop comes
	// between two orders, never between a write and its requests.
	a, err := act.Do(context.WithoutCancel(ctx), id, by, dry)
	if err != nil {
		return r, err
	}
	r.What, r.Detail = a.What, a.Detail
	switch {
	case a.Already:
		r.Outcome = BulkAlready
	case a.Refused != "":
		r.Outcome, r.Why = BulkRefused, a.Refused
		if now, err := o.fitsNow(context.WithoutCancel(ctx), act, id); err != nil {
			return r, err
		} else if now != "" {
			r.Outcome, r.Why = BulkChanged, now
		}
	case dry:
		r.Outcome = BulkWould
	default:
		r.Outcome = BulkDone
	}
	return r, nil
}

// add counts r in the report.
func (rep *BulkReport) add(r BulkResult) {
	switch r.Outcome {
	case BulkDone, BulkWould:
		rep.Done++
	case BulkAlready:
		rep.Already++
	case BulkRefused:
		rep.Refused++
		rep.Why[firstReason(r.Why)]++
	case BulkChanged:
		rep.Changed++
		rep.Why[firstReason(r.Why)]++
	}
	rep.Orders = append(rep.Orders, r)
}

// listAll pages sel to its end: each id once, in the order first given.
func listAll(ctx context.Context, sel Selector) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	next := ""
	for {
		page, token, err := sel(ctx, next)
		if err != nil {
			return nil, err
		}
		for _, id := range page {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if token == "" || token == next {
			return ids, nil
		}
		next = token
	}
}

// judge reads the orders listed (one batch read a hundred) and says, for
// each, why act does not take it ("": it does); nil if act has no Fits.
func (o *Operator) judge(ctx context.Context, act Action, ids []string) (map[string]string, error) {
	if act.Fits == nil || len(ids) == 0 {
		return nil, nil
	}
	tasks, err := o.Store.Tasks(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read the orders to %s: %w", act.Name, err)
	}
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		t, ok := tasks[id]
		if !ok {
			out[id] = "not found"
			continue
		}
		out[id] = act.Fits(t)
	}
	return out, nil
}

// fitsNow reads the order again and says why act does not take it now
// ("": it does, or act cannot tell).
func (o *Operator) fitsNow(ctx context.Context, act Action, id string) (string, error) {
	if act.Fits == nil {
		return "", nil
	}
	tasks, err := o.Store.Tasks(ctx, []string{id})
	if err != nil {
		return "", fmt.Errorf("read %s again: %w", id, err)
	}
	t, ok := tasks[id]
	if !ok {
		return "not found", nil
	}
	return act.Fits(t), nil
}
