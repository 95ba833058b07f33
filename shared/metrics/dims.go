package metrics

import (
	"slices"
	"strings"
	"time"
)

// Metric names of each workflow's health, emitted at each order's end
// (health.Emit) with the dimensions DimensionWorkflow, DimensionVersion,
// DimensionState and, for StepDuration, DimensionStep; no Function: an
// order ends in whichever function wrote its end.
const (
	OrderDuration = "OrderDuration" // milliseconds from an order stored to ended
	StepDuration  = "StepDuration"  // milliseconds from a step made ready to done
	OrdersEnded   = "OrdersEnded"   // 1 an order ended (by State: ended in that state)
	OrdersFailed  = "OrdersFailed"  // 1 an order ended Failed or CompensationFailed, else 0 (the failure rate's numerator)
	OrdersUndone  = "OrdersUndone"  // 1 an order's undo actions ran, else 0 (the compensation rate's)
)

// Dimensions of the workflow health metrics.
const (
	DimensionVersion = "Version"
	DimensionState   = "State"
	DimensionStep    = "Step"
)

// Dims are the dimension sets and values of a series kept for Flush: the
// sets the document declares (each a list of names) and each name's value.
type Dims struct {
	Sets   [][]string
	Values map[string]string
}

// key identifies d's series among those kept.
func (d Dims) key() string {
	var b strings.Builder
	for _, set := range d.Sets {
		b.WriteString(strings.Join(set, ","))
		b.WriteByte(';')
	}
	names := make([]string, 0, len(d.Values))
	for n := range d.Values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b.WriteString(n + "=" + d.Values[n] + "\x00")
	}
	return b.String()
}

// dimSeries are the metrics kept for Flush under one set of dimensions.
type dimSeries struct {
	dims Dims
	keptSeries
}

// keptSeries are metrics kept for Flush, in the order first kept.
type keptSeries struct {
	names  []string
	values map[string]*series
}

// add keeps one value of a metric.
func (k *keptSeries) add(name, unit string, value float64) {
	if k.values == nil {
		k.values = map[string]*series{}
	}
	s := k.values[name]
	if s == nil {
		s = &series{unit: unit}
		k.values[name] = s
		k.names = append(k.names, name)
	}
	s.values = append(s.values, value)
}

// fill moves up to MaxValues values of each kept metric into doc: what is
// left is kept for the next document.
func (k *keptSeries) fill(doc map[string]any) {
	var rest []string
	for _, name := range k.names {
		s := k.values[name]
		n := min(len(s.values), MaxValues)
		addMetric(doc, name, s.unit, s.values[:n])
		if s.values = s.values[n:]; len(s.values) > 0 {
			rest = append(rest, name)
		} else {
			delete(k.values, name)
		}
	}
	k.names = rest
}

// ObserveBy keeps one value of a metric under dims (no Function
// dimension) until Flush, which writes each dims' values as documents of
// their own: one document per invocation and dims, not per order.
func (e *Emitter) ObserveBy(name, unit string, value float64, dims Dims) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := dims.key()
	if e.byDims == nil {
		e.byDims = map[string]*dimSeries{}
	}
	ds := e.byDims[k]
	if ds == nil {
		ds = &dimSeries{dims: dims}
		e.byDims[k] = ds
		e.dimKeys = append(e.dimKeys, k)
	}
	ds.add(name, unit, value)
}

// DurationBy keeps d, in milliseconds, under dims (ObserveBy).
func (e *Emitter) DurationBy(name string, d time.Duration, dims Dims) {
	e.ObserveBy(name, "Milliseconds", float64(d.Milliseconds()), dims)
}

// flushDims writes the series kept by dimensions; e.mu is held.
func (e *Emitter) flushDims() {
	for _, k := range e.dimKeys {
		ds := e.byDims[k]
		for len(ds.names) > 0 {
			doc := e.document(nil)
			dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]map[string]any)[0]
			dir["Dimensions"] = ds.dims.Sets
			delete(doc, "Function")
			for n, v := range ds.dims.Values {
				doc[n] = v
			}
			ds.fill(doc)
			e.write(doc)
		}
	}
	e.byDims, e.dimKeys = nil, nil
}
